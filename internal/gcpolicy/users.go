package gcpolicy

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/internal/podowner"
)

// persistentFacts gathers the facts of a persistently owned reservation: its owner, the pods of its
// users, and, when its owner exists and no pod is bound to it, the reservation the owner moved to.
func persistentFacts(ctx context.Context, c kubeclient.Reader, r *ipamv1.OverlappingRangeIPReservation) (Facts, error) {
	f, err := ownerFacts(ctx, c, *r.Spec.Owner)
	if err != nil {
		return Facts{}, err
	}
	if f.UserPods, err = userPods(ctx, c, r.Spec.Users); err != nil {
		return Facts{}, err
	}
	if f.OwnerExists && len(BoundUsers(r, f)) == 0 {
		f.Successor, err = successor(ctx, c, r)
	}
	return f, err
}

func userPods(ctx context.Context, c kubeclient.Reader, users []ipamv1.ReservationUser) ([]*corev1.Pod, error) {
	pods := make([]*corev1.Pod, len(users))
	for i, u := range users {
		ns, name, ok := SplitPodRef(u.PodRef)
		if !ok {
			continue
		}
		pod, err := GetPod(ctx, c, types.NamespacedName{Namespace: ns, Name: name})
		if err != nil {
			return nil, err
		}
		pods[i] = pod
	}
	return pods, nil
}

// userGone says why user u, whose pod is pod (nil: none exists), is bound no longer: its pod was
// deleted, replaced by one of another UID (a mirror pod answers to its static pod's), or has
// finished. "" while it may still run on the address; a user that names no pod may always.
func userGone(u ipamv1.ReservationUser, pod *corev1.Pod) string {
	switch {
	case u.PodRef == "":
		return ""
	case pod == nil:
		return fmt.Sprintf("pod %s no longer exists", u.PodRef)
	case u.PodUID != "" && !podHasUID(pod, u.PodUID):
		return fmt.Sprintf("pod %s now has UID %s, not %s", u.PodRef, pod.UID, u.PodUID)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return fmt.Sprintf("pod %s has %s", u.PodRef, pod.Status.Phase)
	}
	return ""
}

// StaleUser is a user of a persistently owned reservation whose pod is gone, and why.
type StaleUser struct {
	User ipamv1.ReservationUser
	Why  string
}

// StaleUsers are r's users whose pods are gone (f.UserPods), such as a finished live migration's
// source: its node can no longer remove it (the target's node holds the reservation), node
// isolation lets no other node remove it, and the controller does (Prune).
func StaleUsers(r *ipamv1.OverlappingRangeIPReservation, f Facts) []StaleUser {
	var out []StaleUser
	for i, u := range r.Spec.Users {
		if i < len(f.UserPods) {
			if why := userGone(u, f.UserPods[i]); why != "" {
				out = append(out, StaleUser{User: u, Why: why})
			}
		}
	}
	return out
}

// BoundUsers names r's users that may still run on the address: those whose pods are not known to
// be gone (a user Read found no pod for is gone; one it did not read is not known to be).
func BoundUsers(r *ipamv1.OverlappingRangeIPReservation, f Facts) []string {
	var out []string
	for i, u := range r.Spec.Users {
		var pod *corev1.Pod
		if i < len(f.UserPods) {
			pod = f.UserPods[i]
		} else if u.PodRef != "" {
			out = append(out, userName(u))
			continue
		}
		if userGone(u, pod) == "" {
			out = append(out, userName(u))
		}
	}
	return out
}

func userName(u ipamv1.ReservationUser) string {
	if u.PodRef != "" {
		return "pod " + u.PodRef + " on node " + u.Node
	}
	return "container " + u.ContainerID + " on node " + u.Node
}

// successor finds another reservation of r's owner in r's pool that the owner's own pod is bound
// to, on the node the pod runs on: the address the owner moved to (a requested address that
// replaced a StatefulSet ordinal's, or the other of two first ADDs of one claim). Users are
// written by agents, so one counts only when the API says the same: the pod exists with that UID,
// runs on the user's node, and is the owner's (the claim's launcher pod, the ordinal's pod). A
// node that made up a reservation and a user for it therefore frees nothing.
func successor(ctx context.Context, c kubeclient.Reader, r *ipamv1.OverlappingRangeIPReservation) (string, error) {
	o := *r.Spec.Owner
	var list ipamv1.OverlappingRangeIPReservationList
	sel := kubeclient.MatchingLabels{ipamv1.OwnerLabel: ipamv1.OwnerLabelValue(o.Key()), ipamv1.PoolLabel: ipamv1.LabelValue(r.Spec.Pool)}
	if err := c.List(ctx, &list, sel); err != nil {
		return "", fmt.Errorf("failed to list the reservations of %s: %w", o.Key(), err)
	}
	for i := range list.Items {
		s := &list.Items[i]
		if s.Name == r.Name || !s.Spec.Owner.Is(o) || s.Spec.Pool != r.Spec.Pool || s.DeletionTimestamp != nil {
			continue
		}
		pods, err := userPods(ctx, c, s.Spec.Users)
		if err != nil {
			return "", err
		}
		for j, u := range s.Spec.Users {
			if pod := pods[j]; pod != nil && userGone(u, pod) == "" && pod.Spec.NodeName == u.Node && OwnersPod(o, pod) {
				return fmt.Sprintf("%s (%s), bound to pod %s on node %s", s.Name, s.Spec.Address, u.PodRef, u.Node), nil
			}
		}
	}
	return "", nil
}

// OwnersPod reports whether pod is one of persistent owner o's: a pod whose network selection
// elements reference the IPAMClaim, or the StatefulSet's pod of the ordinal (by the agent's own
// identity rule, podowner.StatefulSet).
func OwnersPod(o ipamv1.ReservationOwner, pod *corev1.Pod) bool {
	if pod.Namespace != o.Namespace {
		return false
	}
	switch o.Kind {
	case ipamv1.OwnerIPAMClaim:
		return podowner.ReferencesClaim(pod, o.Name)
	case ipamv1.OwnerStatefulSet:
		owner, err := podowner.StatefulSet(pod, o.Interface)
		return err == nil && owner.Is(o)
	}
	return false
}
