package kubestore

import (
	"net/netip"
	"strings"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/reservation"
	"github.com/netpool/netpool/ipam"
)

// newReservation builds the reservation that claims al.Addr in pool u for this node.
// A persistently owned address (al.Persistent, the call's claim) records its owner and al's
// attachment as its first user.
func (s *Store) newReservation(u *poolUse, al *allocator.Allocation, claim *claimUse) *ipamv1.OverlappingRangeIPReservation {
	r := reservation.New(s.node, u.state.name, u.scope, u.networkName, al)
	if owner := persistentOwnerOf(claim, al); owner != nil {
		r.Spec.Owner = owner
		r.Spec.Users = []ipamv1.ReservationUser{s.userOf(al)}
		r.Labels[ipamv1.OwnerLabel] = ipamv1.OwnerLabelValue(owner.Key())
	}
	return r
}

// persistentOwnerOf is the spec.owner of al's reservation, nil when the attachment owns it.
func persistentOwnerOf(claim *claimUse, al *allocator.Allocation) *ipamv1.ReservationOwner {
	if al.Persistent == "" || claim == nil || claim.owner.Key() != al.Persistent {
		return nil
	}
	o := claim.owner
	return &o
}

// ownedBy reports whether r is the claim of owner on this node in pool, as one of this store's
// earlier Creates would have made it.
func (s *Store) ownedBy(r *ipamv1.OverlappingRangeIPReservation, pool string, owner allocator.Owner) bool {
	return reservation.OwnedBy(r, s.node, pool, owner)
}

func podOf(podRef, uid string) ipam.PodRef {
	ns, name, _ := strings.Cut(podRef, "/")
	return ipam.PodRef{Namespace: ns, Name: name, UID: uid}
}

// allocationOf converts an index entry of pool u into the allocator's view; key is the allocator's
// pool key.
func allocationOf(key string, u *poolUse, e entry) allocator.Allocation {
	return allocator.Allocation{
		Pool: key, Addr: e.addr, Owner: e.owner, Network: e.network, Pod: e.pod,
		Scope: scopeOf(u), Created: e.created.UTC(), Persistent: e.persistent,
	}
}

// scopeOf is u's overlap scope in the allocator's terms (allocator.Pool.Scope): the network's
// when overlapping ranges are on, else none. The reservation names use u.scope, which says the
// same in the API's terms (the network name, or the pool's name).
func scopeOf(u *poolUse) string {
	if u.overlap {
		return allocator.OverlapScope(u.networkName)
	}
	return ""
}

// addrOf parses a reservation's address.
func addrOf(r *ipamv1.OverlappingRangeIPReservation) (netip.Addr, bool) {
	a, err := netip.ParseAddr(r.Spec.Address)
	return a.Unmap(), err == nil
}
