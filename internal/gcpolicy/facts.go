package gcpolicy

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// Facts are what the policy knows about a reservation's owner. Read gathers them; a caller that
// already holds them (a test, a cache) may fill them in itself.
type Facts struct {
	// Pod is the reservation's pod, nil when no pod of that namespace and name exists.
	Pod *corev1.Pod
	// OwnerExists is whether the reservation's persistent owner (spec.owner: an IPAMClaim, or a
	// StatefulSet with more replicas than the ordinal) exists. Read sets it only for a reservation with an owner, and then reads no pod: a
	// persistently owned address does not depend on its pods.
	OwnerExists bool
	// OwnerScaledDown is set, with OwnerExists unset, when the owner is a StatefulSet that exists
	// with spec.replicas at or below the reservation's ordinal; OwnerDetail then says so.
	OwnerScaledDown bool
	OwnerDetail     string
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
func Read(ctx context.Context, c client.Reader, r *ipamv1.OverlappingRangeIPReservation) (Facts, error) {
	if r.Spec.Owner != nil {
		return ownerFacts(ctx, c, *r.Spec.Owner)
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
func GetPod(ctx context.Context, c client.Reader, key types.NamespacedName) (*corev1.Pod, error) {
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
