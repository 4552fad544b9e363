package kubestore

import (
	"fmt"
	"net/netip"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// NetworkAnnotation holds, on every reservation, the CNI network name (the "name" of the network
// config) of the attachment. GC releases only reservations of its own network on its own node; the
// spec's networkName is the NAD's network_name, the address scope, which several CNI networks may
// share.
const NetworkAnnotation = ipamv1.GroupName + "/network"

// newReservation builds the reservation that claims al.Addr in pool u for this node.
// A persistently owned address (al.Persistent, the call's claim) records its owner and al's
// attachment as its first user.
func (s *Store) newReservation(u *poolUse, al *allocator.Allocation, claim *claimUse) *ipamv1.OverlappingRangeIPReservation {
	r := NewReservation(s.node, u.state.name, u.scope, u.networkName, al)
	if owner := persistentOwnerOf(claim, al); owner != nil {
		r.Spec.Owner = owner
		r.Spec.Users = []ipamv1.ReservationUser{s.userOf(al)}
		r.Labels[ipamv1.OwnerLabel] = ipamv1.OwnerLabelValue(owner.Key())
	}
	return r
}

// NewReservation builds the reservation that claims al.Addr in the IPPool pool for an attachment
// on node: named ipamv1.ReservationName(scope, al.Addr), with the node and pool labels, the CNI
// network annotation (al.Network) and the attachment's identity. networkName is the NAD's
// network_name. It is the object the node agent creates on ADD, and the one that netpoolctl
// migrate creates for an attachment it imports, so that the agent of that node finds it by
// (containerID, ifName) on DEL.
func NewReservation(node, pool, scope, networkName string, al *allocator.Allocation) *ipamv1.OverlappingRangeIPReservation {
	r := &ipamv1.OverlappingRangeIPReservation{
		ObjectMeta: metav1.ObjectMeta{
			Name: ipamv1.ReservationName(scope, al.Addr),
			Labels: map[string]string{
				ipamv1.NodeLabel: ipamv1.LabelValue(node),
				ipamv1.PoolLabel: ipamv1.LabelValue(pool),
			},
			Annotations: map[string]string{NetworkAnnotation: al.Network},
		},
		Spec: ipamv1.OverlappingRangeIPReservationSpec{
			Address:     al.Addr.String(),
			Pool:        pool,
			ContainerID: al.Owner.ContainerID,
			IfName:      al.Owner.IfName,
			PodUID:      al.Pod.UID,
			Node:        node,
			NetworkName: networkName,
		},
	}
	if al.Pod.Namespace != "" && al.Pod.Name != "" {
		r.Spec.PodRef = al.Pod.Namespace + "/" + al.Pod.Name
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

// OwnedBy reports whether r is the claim of owner on node in pool, as NewReservation made it.
func OwnedBy(r *ipamv1.OverlappingRangeIPReservation, node, pool string, owner allocator.Owner) bool {
	return r.Spec.Node == node && r.Spec.Pool == pool &&
		r.Spec.ContainerID == owner.ContainerID && r.Spec.IfName == owner.IfName
}

// ownedBy reports whether r is the claim of owner on this node in pool, as one of this store's
// earlier Creates would have made it.
func (s *Store) ownedBy(r *ipamv1.OverlappingRangeIPReservation, pool string, owner allocator.Owner) bool {
	return OwnedBy(r, s.node, pool, owner)
}

// HolderText names who holds r, for "address in use" errors.
func HolderText(r *ipamv1.OverlappingRangeIPReservation) string {
	s := fmt.Sprintf("%s/%s", r.Spec.ContainerID, r.Spec.IfName)
	if r.Spec.PodRef != "" {
		s += " (pod " + r.Spec.PodRef + ")"
	}
	if r.Spec.Node != "" {
		s += " on node " + r.Spec.Node
	}
	if r.Spec.Pool != "" {
		s += " in pool " + r.Spec.Pool
	}
	return s
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
