package controller

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// judgePool works out a pool's verdict from its spec, the other pools of its network (peers, which
// may include p itself) and its reservation count. The spec is parsed with the plugin's own range
// code, so the capacity is exactly what the allocator can hand out.
func judgePool(p *ipamv1.IPPool, peers []ipamv1.IPPool, allocated int64) poolVerdict {
	v := poolVerdict{allocated: allocated}
	r, err := poolRange(&p.Spec)
	if err != nil {
		v.invalid = err.Error()
		return v
	}
	v.capacity = r.Capacity()
	if v.capacity.Sign() == 0 {
		v.invalid = fmt.Sprintf("no usable address: the window %s-%s of range %s is entirely excluded", r.Start, r.End, p.Spec.Range)
		return v
	}
	v.invalid = overlapText(p, r, peers)
	return v
}

// poolRange parses a pool's spec into the allocator's range. Errors name the spec field (in the
// API's camelCase) and the value.
func poolRange(spec *ipamv1.IPPoolSpec) (ipam.Range, error) {
	var gateway netip.Addr
	if spec.Gateway != "" {
		g, err := netip.ParseAddr(spec.Gateway)
		if err != nil {
			return ipam.Range{}, fmt.Errorf("spec.gateway %q: not an IP address", spec.Gateway)
		}
		gateway = g
	}
	r, err := ipam.ParseRange("spec", ipam.RangeSpec{
		Range: spec.Range, RangeStart: spec.RangeStart, RangeEnd: spec.RangeEnd, Exclude: spec.Exclude,
	}, gateway)
	var ce *ipam.ConfigError
	if errors.As(err, &ce) {
		field := strings.NewReplacer("range_start", "rangeStart", "range_end", "rangeEnd").Replace(ce.Field)
		return r, fmt.Errorf("%s %q: %s", field, ce.Value, ce.Reason)
	}
	return r, err
}

// overlapText names the other pools of p's network whose windows share an address with r's, or
// returns "" when none does. Two pools of one network share one address space, so an overlap can
// hand one address to two attachments. Peers whose spec does not parse are judged on their own.
func overlapText(p *ipamv1.IPPool, r ipam.Range, peers []ipamv1.IPPool) string {
	var hits []string
	for i := range peers {
		q := &peers[i]
		if q.Name == p.Name || q.Spec.NetworkName != p.Spec.NetworkName || q.DeletionTimestamp != nil {
			continue
		}
		qr, err := poolRange(&q.Spec)
		if err != nil || qr.Family() != r.Family() {
			continue
		}
		if r.Start.Compare(qr.End) <= 0 && qr.Start.Compare(r.End) <= 0 {
			hits = append(hits, fmt.Sprintf("%s (%s-%s)", q.Name, qr.Start, qr.End))
		}
	}
	if len(hits) == 0 {
		return ""
	}
	sort.Strings(hits)
	network := "the unnamed network"
	if p.Spec.NetworkName != "" {
		network = fmt.Sprintf("network %q", p.Spec.NetworkName)
	}
	return fmt.Sprintf("spec.range %q: the window %s-%s overlaps IPPool %s of %s", p.Spec.Range, r.Start, r.End, strings.Join(hits, ", "), network)
}
