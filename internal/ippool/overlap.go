package ippool

import (
	"fmt"
	"sort"
	"strings"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// Overlaps reports whether p and q share an address space (one networkName, one family) and their
// windows share an address. Two such pools can hand one address to two attachments.
func (p *Pool) Overlaps(q *Pool) bool {
	if p.NetworkName() != q.NetworkName() || p.Range.Family() != q.Range.Family() {
		return false
	}
	return p.Range.Start.Compare(q.Range.End) <= 0 && q.Range.Start.Compare(p.Range.End) <= 0
}

// yieldsTo reports whether an overlap between p and q makes p invalid. Two operators' pools that
// overlap are both invalid: the operator has to decide. An operator's pool never yields to a pool
// derived from a NAD, and of two derived pools the newer yields (creation time, then name), so a
// tenant's inline range cannot take away a pool that others already use.
func (p *Pool) yieldsTo(q *Pool) bool {
	pd, qd := IsDerived(p.Object), IsDerived(q.Object)
	switch {
	case pd != qd:
		return pd
	case !pd:
		return true
	}
	pt, qt := p.Object.CreationTimestamp, q.Object.CreationTimestamp
	if !pt.Equal(&qt) {
		return qt.Before(&pt)
	}
	return q.Name() < p.Name()
}

// OverlapText names the peers of p's address space that p overlaps and yields to, or returns ""
// when there are none: the message of the pool's Invalid condition. Peers whose spec does not
// parse, and peers being deleted, are judged on their own.
func OverlapText(p *Pool, peers []ipamv1.IPPool) string {
	var hits []string
	for _, q := range Governing(p, peers)[1:] {
		if p.yieldsTo(q) {
			kind := ""
			if !IsDerived(q.Object) && IsDerived(p.Object) {
				kind = ", an operator's pool"
			}
			hits = append(hits, fmt.Sprintf("%s (%s-%s%s)", q.Name(), q.Range.Start, q.Range.End, kind))
		}
	}
	if len(hits) == 0 {
		return ""
	}
	sort.Strings(hits)
	network := "the unnamed network"
	if p.NetworkName() != "" {
		network = fmt.Sprintf("network %q", p.NetworkName())
	}
	return fmt.Sprintf("spec.range %q: the window %s-%s overlaps IPPool %s of %s",
		p.Object.Spec.Range, p.Range.Start, p.Range.End, strings.Join(hits, ", "), network)
}
