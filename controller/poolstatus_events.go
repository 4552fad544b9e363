package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// poolTransitionEvents are the Warning Events recorded when a pool's condition turns True: the
// people who own the pool learn of it from `kubectl describe` and `kubectl get events`, not only
// from a status they would have to watch.
var poolTransitionEvents = []struct {
	condition, reason, note string
}{
	{ipamv1.IPPoolExhaustedCondition, EventPoolExhausted,
		"IPPool %s is exhausted: %s; ADDs from it fail with code 100 until an address is released or the pool is widened"},
	{ipamv1.IPPoolDeletionBlockedCondition, EventPoolDeletionBlocked, "IPPool %s: %s"},
}

// recordTransitions records one Event for each condition of poolTransitionEvents that is True in
// after and was not in before (the status just written and the one it replaced), so each
// transition is reported once, not on every reconcile while the condition holds.
func recordTransitions(rec events.EventRecorder, before, after *ipamv1.IPPool) {
	if rec == nil {
		return
	}
	for _, e := range poolTransitionEvents {
		if meta.IsStatusConditionTrue(before.Status.Conditions, e.condition) ||
			!meta.IsStatusConditionTrue(after.Status.Conditions, e.condition) {
			continue
		}
		c := meta.FindStatusCondition(after.Status.Conditions, e.condition)
		rec.Eventf(after, nil, corev1.EventTypeWarning, e.reason, actionStatus, e.note, after.Name, c.Message)
	}
}
