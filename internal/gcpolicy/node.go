package gcpolicy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	networkv1 "github.com/netpool/netpool/crds/network/v1"
)

// OnDeletedNode judges r, a reservation of node, once node no longer exists (the controller
// waits its grace period after it first finds the node gone), given r's pod (nil when there is
// none). The address goes with the node unless:
//
//   - an EgressRouter holds it: the router's address belongs to the router, which releases it;
//   - a persistent owner (spec.owner: an IPAMClaim, a sticky StatefulSet's pod) holds it: it
//     outlives its node, since the VM or the pod restarts elsewhere and takes the address over;
//   - its pod runs on a node of another name: the agent's node name is not the Node's, so the
//     address is in use, and the pod policy (Judge) decides it instead.
func OnDeletedNode(r *ipamv1.OverlappingRangeIPReservation, pod *corev1.Pod, node string) Verdict {
	switch {
	case r.Labels[networkv1.RouterUIDLabel] != "":
		return Verdict{}
	case r.Spec.Owner != nil:
		return Verdict{}
	case pod != nil && pod.Spec.NodeName != "" && pod.Spec.NodeName != node:
		return Verdict{Detail: fmt.Sprintf("node %s has no Node object, but pod %s runs on node %s", node, r.Spec.PodRef, pod.Spec.NodeName)}
	}
	return Verdict{Reason: ReasonNodeDeleted, Detail: fmt.Sprintf("node %s was deleted", node)}
}
