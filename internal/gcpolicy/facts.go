package gcpolicy

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/kubeclient"
)

// Facts are what the policy knows about a reservation's owner. Read gathers them; a caller that
// already holds them (a test, a cache) may fill them in itself.
type Facts struct {
	// Pod is the reservation's pod, nil when no pod of that namespace and name exists. Read sets
	// it only for a reservation without a persistent owner.
	Pod *corev1.Pod
	// OwnerExists is whether the reservation's persistent owner (spec.owner: an IPAMClaim of the
	// recorded UID, or a StatefulSet with more replicas than the ordinal) exists.
	OwnerExists bool
	// OwnerScaledDown is set, with OwnerExists unset, when the owner is a StatefulSet that exists
	// with spec.replicas at or below the reservation's ordinal. OwnerDetail says what was found
	// of the owner, either way.
	OwnerScaledDown bool
	OwnerDetail     string
	// UserPods are the pods of the reservation's users (spec.users), by index: nil where the pod
	// does not exist (or the user names none). Read sets them for a persistently owned
	// reservation.
	UserPods []*corev1.Pod
	// Successor, for a persistently owned reservation that no pod is bound to while its owner
	// exists, names another reservation of the same owner and pool that the owner's own pod is
	// bound to, where it runs: the address the owner moved to. "" when there is none.
	Successor string
}

// Judgeable reports whether r names an owner the policy can judge. A reservation without a pod
// identity (the runtime passed no K8S_POD_*) and without a persistent owner, or one being
// deleted, is never judged.
func Judgeable(r *ipamv1.OverlappingRangeIPReservation) bool {
	_, _, ok := SplitPodRef(r.Spec.PodRef)
	return (ok || r.Spec.Owner != nil) && r.DeletionTimestamp == nil
}

// Read gathers the facts about r's owner from c: the controller passes its cache and then the API
// server, the CLI the API server.
func Read(ctx context.Context, c kubeclient.Reader, r *ipamv1.OverlappingRangeIPReservation) (Facts, error) {
	if r.Spec.Owner != nil {
		return persistentFacts(ctx, c, r)
	}
	ns, name, ok := SplitPodRef(r.Spec.PodRef)
	if !ok {
		return Facts{}, nil
	}
	pod, err := GetPod(ctx, c, types.NamespacedName{Namespace: ns, Name: name})
	if err != nil {
		return Facts{}, err
	}
	return Facts{Pod: pod}, nil
}

// SplitPodRef splits a reservation's podRef, "namespace/name"; ok is false when it has no pod.
func SplitPodRef(ref string) (string, string, bool) {
	ns, name, ok := strings.Cut(ref, "/")
	return ns, name, ok && ns != "" && name != ""
}

// GetPod reads a pod; nil when it does not exist.
func GetPod(ctx context.Context, c kubeclient.Reader, key types.NamespacedName) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := c.Get(ctx, key, pod)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to get pod %s: %w", key, err)
	}
	return pod, nil
}
