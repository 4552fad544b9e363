package gcpolicy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// Verdict is the policy's judgement of one reservation.
type Verdict struct {
	// Reason is one of the Reason* constants when the reservation is to be released; empty when
	// it stays.
	Reason string
	// Detail says why, naming the pod and what was found, for the Event and the log. A kept
	// reservation has a detail only when something could not be read (a malformed network-status).
	Detail string
	// Recheck, when positive, is when the reservation should be judged again: it is younger than
	// the grace period.
	Recheck time.Duration
	// Bound, for a persistently owned reservation whose owner is gone, says which pods are still
	// bound to it: it stays until their DEL unbinds them or they are gone.
	Bound string
}

// Annotations of mirror pods. The kubelet runs a static pod under a UID of its own (a hash of the
// manifest), which the CNI runtime passes as K8S_POD_UID, and shows it in the API as a mirror pod
// with another UID; these annotations carry the static pod's.
const (
	MirrorAnnotation     = "kubernetes.io/config.mirror"
	ConfigHashAnnotation = "kubernetes.io/config.hash"
)

// podHasUID reports whether uid is pod's: its API UID or, for a mirror pod, its static pod's UID.
func podHasUID(pod *corev1.Pod, uid string) bool {
	if string(pod.UID) == uid {
		return true
	}
	if _, mirror := pod.Annotations[MirrorAnnotation]; !mirror {
		return false
	}
	return pod.Annotations[MirrorAnnotation] == uid || pod.Annotations[ConfigHashAnnotation] == uid
}

// Judge decides whether r leaked, given the facts about its owner (Read gathers them), the
// time now and the grace period. It is the whole GC policy:
//
//   - a reservation younger than grace is never released, so an ADD in progress (which creates the
//     reservation before Multus writes the pod's network-status) cannot race GC; it is judged
//     again once it is old enough;
//   - a reservation without a pod identity (the runtime passed no K8S_POD_*) is never released;
//   - it is released when its pod does not exist, exists with another UID (a mirror pod also
//     answers to its static pod's UID), or has finished;
//   - it is released when its pod is Running and has a network-status that does not list the
//     address. A pod without network-status (Multus has not written it, or never does), a pending
//     pod (an ADD may still be running) and a terminating pod (the kubelet will DEL) keep theirs.
//
// A persistently owned reservation (spec.owner) is judged by its owner, never by its holder pod,
// which comes and goes (a VM restarts or migrates, a StatefulSet pod is recreated on another node):
//
//   - while its owner exists it stays, unless no pod is bound to it and the owner's own pod is
//     bound to another of the owner's reservations in the pool (the owner moved there:
//     Superseded);
//   - once its IPAMClaim is gone (or was made again, with another UID), or its StatefulSet is gone
//     or scaled to the ordinal or below, it is released when no pod is bound to it any more: its
//     users' pods are gone, or their DEL unbound them. Pods terminate after a scale-down, and a
//     new pod must not get an address a running one still uses.
func Judge(r *ipamv1.OverlappingRangeIPReservation, f Facts, now time.Time, grace time.Duration) Verdict {
	pod := f.Pod
	if r.Spec.PodRef == "" && r.Spec.Owner == nil {
		return Verdict{}
	}
	if age := now.Sub(r.CreationTimestamp.Time); age < grace {
		return Verdict{Recheck: grace - age}
	}
	if o := r.Spec.Owner; o != nil {
		return judgeOwned(r, *o, f)
	}
	if pod == nil {
		return Verdict{Reason: ReasonPodDeleted, Detail: fmt.Sprintf("pod %s no longer exists", r.Spec.PodRef)}
	}
	if r.Spec.PodUID != "" && !podHasUID(pod, r.Spec.PodUID) {
		return Verdict{Reason: ReasonPodReplaced, Detail: fmt.Sprintf(
			"pod %s now has UID %s; the address was reserved for UID %s", r.Spec.PodRef, pod.UID, r.Spec.PodUID)}
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return Verdict{Reason: ReasonPodFinished, Detail: fmt.Sprintf("pod %s has %s", r.Spec.PodRef, pod.Status.Phase)}
	case corev1.PodRunning:
	default:
		return Verdict{}
	}
	if pod.DeletionTimestamp != nil {
		return Verdict{}
	}
	addrs, present, err := NetworkStatusAddrs(pod)
	if err != nil {
		// The annotation cannot be read, so it proves nothing; the detail lets the caller log it.
		return Verdict{Detail: err.Error()}
	}
	if !present {
		return Verdict{}
	}
	a, err := netip.ParseAddr(r.Spec.Address)
	if err != nil || slices.Contains(addrs, a.Unmap()) {
		return Verdict{}
	}
	return Verdict{Reason: ReasonNotInNetworkStatus, Detail: fmt.Sprintf(
		"pod %s is running and its network-status does not list %s", r.Spec.PodRef, r.Spec.Address)}
}

// judgeOwned judges a persistently owned reservation past its grace period (see Judge).
func judgeOwned(r *ipamv1.OverlappingRangeIPReservation, o ipamv1.ReservationOwner, f Facts) Verdict {
	bound := BoundUsers(r, f)
	gone := f.OwnerDetail
	if gone == "" {
		gone = fmt.Sprintf("%s %s/%s no longer exists", o.Kind, o.Namespace, o.Name)
	}
	switch {
	case f.OwnerExists && len(bound) == 0 && f.Successor != "":
		return Verdict{Reason: ReasonSuperseded, Detail: fmt.Sprintf("no pod is bound to %s, and %s %s/%s moved to %s",
			r.Spec.Address, o.Kind, o.Namespace, o.Name, f.Successor)}
	case f.OwnerExists:
		return Verdict{}
	case len(bound) > 0:
		return Verdict{Bound: fmt.Sprintf("%s, but %s still bound to %s; it is released once unbound (DEL) or gone",
			gone, strings.Join(bound, ", "), r.Spec.Address)}
	case f.OwnerScaledDown:
		return Verdict{Reason: ReasonOwnerScaledDown, Detail: gone}
	}
	return Verdict{Reason: ReasonOwnerDeleted, Detail: gone}
}
