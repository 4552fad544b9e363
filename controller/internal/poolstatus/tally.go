package poolstatus

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// poolTally counts each pool's reservations from the reservation informer's events, so the pool
// status reconciler reads a count in O(1) however many reservations a pool holds. Listing a pool's
// reservations from the cache, even through an index, would copy every one of them on every
// reconcile: 100,000 objects per status update.
//
// The count is exact: the informer delivers each object's add once and its delete once (a relist
// turns into updates and tombstoned deletes), and a reservation's spec.pool never changes. The
// tally is fed by the pool status controller's own source, whose initial list has been delivered
// before the first reconcile runs.
type poolTally struct {
	mu     sync.Mutex
	counts map[string]int64
}

func newPoolTally() *poolTally {
	return &poolTally{counts: map[string]int64{}}
}

// count returns how many reservations pool holds.
func (t *poolTally) count(pool string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counts[pool]
}

func (t *poolTally) add(pool string, delta int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.counts[pool] + delta
	if n == 0 {
		delete(t.counts, pool)
		return
	}
	t.counts[pool] = n
}

// handler counts each reservation event and then queues the pool it belongs to, so a reconcile
// queued by an event always sees that event counted.
func (t *poolTally) handler() handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	enqueue := func(q queue, pool string) {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: pool}})
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) {
			if pool, ok := poolOf(e.Object); ok {
				t.add(pool, 1)
				enqueue(q, pool)
			}
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			oldPool, okOld := poolOf(e.ObjectOld)
			newPool, okNew := poolOf(e.ObjectNew)
			if !okOld || !okNew || oldPool == newPool {
				return
			}
			t.add(oldPool, -1) // spec.pool is immutable; this keeps the tally right if it ever is not
			t.add(newPool, 1)
			enqueue(q, oldPool)
			enqueue(q, newPool)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q queue) {
			if pool, ok := poolOf(e.Object); ok {
				t.add(pool, -1)
				enqueue(q, pool)
			}
		},
	}
}

// poolOf returns the pool of a reservation.
func poolOf(obj client.Object) (string, bool) {
	r, ok := obj.(*ipamv1.OverlappingRangeIPReservation)
	if !ok || r.Spec.Pool == "" {
		return "", false
	}
	return r.Spec.Pool, true
}
