package migrate

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/gcpolicy"
	"github.com/netpool/netpool/internal/ippool"
	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/internal/reservation"
)

// The kinds of a Discrepancy.
const (
	// KindHeldTwice: a live whereabouts allocation and a netpool reservation of another
	// attachment hold one address in one netpool uniqueness scope: two pods have it.
	KindHeldTwice = "HeldTwice"
	// KindWhereaboutsOnly: a live whereabouts allocation lies in a netpool pool of its network,
	// and netpool holds no reservation for it, so netpool may hand the address out again
	// (migrate whereabouts --apply imports it).
	KindWhereaboutsOnly = "WhereaboutsOnly"
)

// Discrepancy is an address whereabouts and netpool disagree on.
type Discrepancy struct {
	Kind    string `json:"kind"`
	Address string `json:"address"`
	// Whereabouts is the whereabouts record: namespace/IPPool[offset], or the
	// OverlappingRangeIPReservation's namespace/name.
	Whereabouts string `json:"whereabouts"`
	// Pod and IfName are whereabouts' holder.
	Pod    string `json:"pod"`
	IfName string `json:"ifName,omitempty"`
	// Pool is the netpool IPPool the address lies in; Reservation and Holder netpool's holder.
	Pool        string `json:"pool"`
	Reservation string `json:"reservation,omitempty"`
	Holder      string `json:"holder,omitempty"`
	Message     string `json:"message"`
}

// Verification is what Verify compared.
type Verification struct {
	// Holdings counts the live whereabouts allocations that lie in netpool pools.
	Holdings      int
	Discrepancies []Discrepancy
}

// wbHolding is one address whereabouts holds, from its IPPool or its reservation.
type wbHolding struct {
	network     string // network_name
	addr        netip.Addr
	record      string
	pod, ifName string
	containerID string // empty for a reservation: whereabouts v0.9 records none there
}

// Verify compares whereabouts' records (IPPool allocations and OverlappingRangeIPReservations, in
// every namespace) with netpool's reservations, NAD by NAD or not: each live whereabouts holder of
// an address that lies in a netpool pool of its network must be the holder of netpool's
// reservation of that address (the migration imported it); otherwise the address is held twice,
// or by whereabouts only. A holder is live unless the controller's GC policy would release its
// reservation at once (its pod is gone, finished or no longer lists the address): a whereabouts
// leak holds nothing. Verify writes nothing. It fails with a "whereabouts is not installed" error
// when the API server does not serve whereabouts' kinds.
func Verify(ctx context.Context, c kubeclient.Reader) (*Verification, error) {
	var holdings []wbHolding
	var pools []*wbPool
	err := listEach(ctx, c, wbPoolList, func(data []byte, _, _ string) {
		if p, err := parsePool(data); err == nil {
			pools = append(pools, p)
		}
	})
	if err != nil {
		return nil, err
	}
	var reservations []wbReservation
	err = listEach(ctx, c, wbReservationList, func(data []byte, _, _ string) {
		if r, err := parseReservation(data); err == nil {
			reservations = append(reservations, r)
		}
	})
	if err != nil {
		return nil, err
	}
	var npPools ipamv1.IPPoolList
	if err := c.List(ctx, &npPools); err != nil {
		return nil, fmt.Errorf("failed to list the IPPools: %w", err)
	}
	var npRes ipamv1.OverlappingRangeIPReservationList
	if err := c.List(ctx, &npRes); err != nil {
		return nil, fmt.Errorf("failed to list the reservations: %w", err)
	}
	networks := map[string]bool{}
	for i := range npPools.Items {
		networks[npPools.Items[i].Spec.NetworkName] = true
	}
	for _, p := range pools {
		network, ok := wbNetworkOf(p.Name, p.Range)
		if !ok {
			continue
		}
		for _, a := range p.Allocations {
			holdings = append(holdings, wbHolding{network: network, addr: a.Addr, record: p.allocationID(a.Key),
				pod: a.PodRef, ifName: a.IfName, containerID: a.ContainerID})
		}
	}
	for _, r := range reservations {
		if network, addr, ok := wbReservationAddr(r.Name, networks); ok {
			holdings = append(holdings, wbHolding{network: network, addr: addr, record: r.Namespace + "/" + r.Name, pod: r.PodRef, ifName: r.IfName})
		}
	}
	v := &verifier{c: c, pods: podCache{c: c, pods: map[string]*corev1.Pod{}}, res: map[string]*ipamv1.OverlappingRangeIPReservation{}, seen: map[string]bool{}}
	for i := range npPools.Items {
		p := &npPools.Items[i]
		if parsed, err := ippool.Parse(p); err == nil {
			v.pools = append(v.pools, poolOf{p, parsed.Range.Subnet})
		}
	}
	for i := range npRes.Items {
		v.res[npRes.Items[i].Name] = &npRes.Items[i]
	}
	out := &Verification{Discrepancies: []Discrepancy{}}
	for _, h := range holdings {
		if err := v.check(ctx, h, out); err != nil {
			return nil, err
		}
	}
	sort.SliceStable(out.Discrepancies, func(i, j int) bool {
		a, b := out.Discrepancies[i], out.Discrepancies[j]
		if a.Address != b.Address {
			return netip.MustParseAddr(a.Address).Less(netip.MustParseAddr(b.Address))
		}
		return a.Whereabouts < b.Whereabouts
	})
	return out, nil
}

type poolOf struct {
	pool   *ipamv1.IPPool
	subnet netip.Prefix
}

type verifier struct {
	c     kubeclient.Reader
	pods  podCache
	pools []poolOf
	res   map[string]*ipamv1.OverlappingRangeIPReservation
	// seen holds each (network, address, pod, interface) checked, so that a whereabouts IPPool
	// allocation and its reservation are one holding.
	seen map[string]bool
}

func (v *verifier) check(ctx context.Context, h wbHolding, out *Verification) error {
	key := h.network + "\x00" + h.addr.String() + "\x00" + h.pod + "\x00" + h.ifName
	if v.seen[key] {
		return nil
	}
	v.seen[key] = true
	var in []poolOf
	for _, p := range v.pools {
		if p.pool.Spec.NetworkName == h.network && p.subnet.Contains(h.addr) {
			in = append(in, p)
		}
	}
	if len(in) == 0 {
		return nil // not netpool's yet: nothing to compare
	}
	ref, ok := splitPodRef(h.pod)
	if !ok {
		return nil // no pod: nothing can be attached with it
	}
	pod, err := v.pods.get(ctx, ref)
	if err != nil {
		return err
	}
	if pod != nil {
		ref.UID = string(pod.UID)
	}
	first := in[0].pool
	scope := ippool.ReservationScope(first.Name, h.network, ippool.Overlapping(first))
	// Judged as the migration would import it: a leak by the GC policy is no holder.
	node := ""
	if pod != nil {
		node = pod.Spec.NodeName
	}
	as := reservation.New(node, first.Name, scope, h.network, &allocator.Allocation{Addr: h.addr,
		Owner: allocator.Owner{ContainerID: h.containerID, IfName: h.ifName}, Pod: ref})
	if verdict := gcpolicy.Judge(as, gcpolicy.Facts{Pod: pod}, time.Now(), 0); verdict.Reason != "" || node == "" {
		return nil
	}
	out.Holdings++
	var holders []*ipamv1.OverlappingRangeIPReservation
	named := map[string]bool{}
	for _, p := range in {
		s := ippool.ReservationScope(p.pool.Name, h.network, ippool.Overlapping(p.pool))
		name := ipamv1.ReservationName(s, h.addr)
		if r := v.res[name]; r != nil && !named[name] {
			named[name] = true
			holders = append(holders, r)
		}
	}
	d := Discrepancy{Address: h.addr.String(), Whereabouts: h.record, Pod: h.pod, IfName: h.ifName, Pool: first.Name}
	if len(holders) == 0 {
		d.Kind = KindWhereaboutsOnly
		d.Message = fmt.Sprintf("whereabouts gives %s to %s (%s, %s), and netpool holds no reservation for it in IPPool %s: netpool may hand it out again "+
			"(netpoolctl migrate whereabouts --apply imports it)", h.addr, h.pod, h.ifName, h.record, first.Name)
		out.Discrepancies = append(out.Discrepancies, d)
		return nil
	}
	for _, r := range holders {
		if sameAttachment(r, h) {
			continue
		}
		d := d
		d.Kind, d.Pool, d.Reservation, d.Holder = KindHeldTwice, r.Spec.Pool, r.Name, reservation.Holder(r)
		d.Message = fmt.Sprintf("%s is held twice: whereabouts gives it to %s (%s, %s), netpool to %s (reservation %s)",
			h.addr, h.pod, h.ifName, h.record, reservation.Holder(r), r.Name)
		out.Discrepancies = append(out.Discrepancies, d)
	}
	return nil
}

// sameAttachment reports whether netpool's reservation r is for whereabouts' holder h: the same
// pod and interface, and the same container where whereabouts recorded one.
func sameAttachment(r *ipamv1.OverlappingRangeIPReservation, h wbHolding) bool {
	return r.Spec.PodRef == h.pod && r.Spec.IfName == h.ifName && (h.containerID == "" || r.Spec.ContainerID == h.containerID)
}

// wbReservationAddr reads the network and address of a whereabouts OverlappingRangeIPReservation
// name, "<network_name>-<address>" with every ':' made '-' (NormalizeIP), trying the networks
// netpool's pools have, the longest first; ok is false when none fits.
func wbReservationAddr(name string, networks map[string]bool) (string, netip.Addr, bool) {
	names := make([]string, 0, len(networks))
	for n := range networks {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, n := range names {
		rest := name
		if n != "" {
			var ok bool
			if rest, ok = strings.CutPrefix(name, n+"-"); !ok {
				continue
			}
		}
		if a, err := netip.ParseAddr(strings.ReplaceAll(rest, "-", ":")); err == nil && !a.Is4In6() && a.Zone() == "" {
			return n, a, true
		}
	}
	return "", netip.Addr{}, false
}
