package kubestore

import (
	"time"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// ownerAddress is what decides which of a persistent owner's reservations in one pool the agent
// binds, should the owner hold two: a requested address that replaced the one a StatefulSet
// ordinal held, or the first ADDs of one claim on two nodes at once, which each claim one. The
// other, once no pod is bound to it and the owner's pod is bound to this one, is the controller's
// GC's to release (gcpolicy, ReasonSuperseded).
type ownerAddress struct {
	name string
	// bound is whether any attachment is bound (spec.users is not empty).
	bound   bool
	created time.Time
}

func ownerAddressOf(r *ipamv1.OverlappingRangeIPReservation) ownerAddress {
	return ownerAddress{name: r.Name, bound: len(r.Spec.Users) > 0, created: r.CreationTimestamp.Time}
}

// givesWayTo reports whether a, one of an owner's addresses in a pool, gives way to b, another of
// the same owner and pool: an address an attachment is bound to never does (it is in use); an
// unbound one gives way to a bound one, then to a newer one (the last requested), the name
// breaking a tie. So of two, exactly one gives way, unless both are bound.
func (a ownerAddress) givesWayTo(b ownerAddress) bool {
	switch {
	case a.name == b.name || a.bound:
		return false
	case b.bound:
		return true
	case !a.created.Equal(b.created):
		return b.created.After(a.created)
	}
	return b.name > a.name
}
