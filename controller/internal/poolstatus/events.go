package poolstatus

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// Event reasons on IPPools (cluster-scoped, so their Events land in the default namespace).
const (
	// EventPoolExhausted (Warning): the pool's last free address was taken; ADDs from it fail with
	// code 100 until one is released. Recorded once each time the pool turns Exhausted.
	EventPoolExhausted = "PoolExhausted"
	// EventPoolDeletionBlocked (Warning): the pool was deleted while reservations name it; it
	// stays until they are released. Recorded once per deletion.
	EventPoolDeletionBlocked = "DeletionBlocked"
)

// actionStatus is the action of the pool Events (events.k8s.io/v1 requires one).
const actionStatus = "UpdateStatus"

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

// transitionMemo remembers, per pool, the conditions already announced True. The "before" a
// reconcile sees comes from the cache, which may not show the reconciler's own last status write
// yet; without the memo, that reconcile would announce the same transition a second time.
type transitionMemo struct {
	mu   sync.Mutex
	seen map[types.UID]map[string]bool
}

// announce reports whether condition of pool uid, True now, is to be announced: not when it was
// already announced since it was last seen not True. A nil memo announces every time.
func (m *transitionMemo) announce(uid types.UID, condition string) bool {
	if m == nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil {
		m.seen = map[types.UID]map[string]bool{}
	}
	if m.seen[uid][condition] {
		return false
	}
	if m.seen[uid] == nil {
		m.seen[uid] = map[string]bool{}
	}
	m.seen[uid][condition] = true
	return true
}

// forget records that condition of pool uid is not True, so its next turn to True is announced.
func (m *transitionMemo) forget(uid types.UID, condition string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.seen[uid], condition)
	if len(m.seen[uid]) == 0 {
		delete(m.seen, uid)
	}
}

// recordTransitions records one Event for each condition of poolTransitionEvents that is True in
// after and was not in before (the status just written and the one it replaced), so each
// transition is reported once, not on every reconcile while the condition holds; memo (may be nil)
// keeps a stale before from reporting it twice.
func recordTransitions(rec events.EventRecorder, memo *transitionMemo, before, after *ipamv1.IPPool) {
	if rec == nil {
		return
	}
	for _, e := range poolTransitionEvents {
		if !meta.IsStatusConditionTrue(after.Status.Conditions, e.condition) {
			memo.forget(after.UID, e.condition)
			continue
		}
		if !memo.announce(after.UID, e.condition) || meta.IsStatusConditionTrue(before.Status.Conditions, e.condition) {
			continue
		}
		c := meta.FindStatusCondition(after.Status.Conditions, e.condition)
		rec.Eventf(after, nil, corev1.EventTypeWarning, e.reason, actionStatus, e.note, after.Name, c.Message)
	}
}
