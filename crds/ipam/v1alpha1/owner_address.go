package v1alpha1

import "time"

// OwnerAddress is what decides which of a persistent owner's reservations in one pool is its
// address, should it hold two: a requested address that replaced the one a StatefulSet ordinal
// held, or the first ADDs of one claim on two nodes at once, which each claim one. The node agent
// (which finds the owner's address) and the controller's GC (which releases the other) apply the
// same order, GivesWayTo.
// +kubebuilder:object:generate=false
type OwnerAddress struct {
	Name string
	// Bound is whether any attachment is bound (spec.users is not empty).
	Bound bool
	// Listed is whether the owner's record names the address (an IPAMClaim's status.ips).
	Listed  bool
	Created time.Time
}

// OwnerAddressOf is r's place in that order; listed says whether the owner's record names it.
func OwnerAddressOf(r *OverlappingRangeIPReservation, listed bool) OwnerAddress {
	return OwnerAddress{Name: r.Name, Bound: len(r.Spec.Users) > 0, Listed: listed, Created: r.CreationTimestamp.Time}
}

// GivesWayTo reports whether a, one of an owner's addresses in a pool, gives way to b, another of
// the same owner and pool. An address an attachment is bound to never gives way (it is in use);
// an unbound one gives way to a bound one, then to one the owner's record lists, then to a newer
// one (the last requested), the name breaking a tie. So of two, exactly one gives way.
func (a OwnerAddress) GivesWayTo(b OwnerAddress) bool {
	switch {
	case a.Name == b.Name || a.Bound:
		return false
	case b.Bound:
		return true
	case a.Listed != b.Listed:
		return b.Listed
	case !a.Created.Equal(b.Created):
		return b.Created.After(a.Created)
	}
	return b.Name > a.Name
}
