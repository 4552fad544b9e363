// Package reservation builds and reads the OverlappingRangeIPReservation of one attachment as the
// node agent's store makes it, so that netpoolctl migrate creates the same object (the agent of
// that node then finds it by container ID and interface on DEL) and every tool names its holder
// the same way.
package reservation

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// New builds the reservation that claims al.Addr in the IPPool pool for an attachment
// on node: named ipamv1.ReservationName(scope, al.Addr), with the node and pool labels, the CNI
// network annotation (al.Network) and the attachment's identity. networkName is the NAD's
// network_name. It is the object the node agent creates on ADD, and the one that netpoolctl
// migrate creates for an attachment it imports, so that the agent of that node finds it by
// (containerID, ifName) on DEL.
func New(node, pool, scope, networkName string, al *allocator.Allocation) *ipamv1.OverlappingRangeIPReservation {
	r := &ipamv1.OverlappingRangeIPReservation{
		ObjectMeta: metav1.ObjectMeta{
			Name: ipamv1.ReservationName(scope, al.Addr),
			Labels: map[string]string{
				ipamv1.NodeLabel: ipamv1.LabelValue(node),
				ipamv1.PoolLabel: ipamv1.LabelValue(pool),
			},
			Annotations: map[string]string{ipamv1.NetworkAnnotation: al.Network},
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

// OwnedBy reports whether r is the claim of owner on node in pool, as New made it.
func OwnedBy(r *ipamv1.OverlappingRangeIPReservation, node, pool string, owner allocator.Owner) bool {
	return r.Spec.Node == node && r.Spec.Pool == pool &&
		r.Spec.ContainerID == owner.ContainerID && r.Spec.IfName == owner.IfName
}

// Holder names who holds r, for "address in use" errors.
func Holder(r *ipamv1.OverlappingRangeIPReservation) string {
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
