package poolstatus

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/netpool/netpool/controller/internal/ctrltest"
)

func TestPoolTallyCountsEventsAndQueuesThePool(t *testing.T) {
	tally := newPoolTally()
	h := tally.handler()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	ctx := context.Background()
	a1, a2 := ctrltest.NewReservation("a", "10.0.0.1", nil, "n"), ctrltest.NewReservation("a", "10.0.0.2", nil, "n")
	b1 := ctrltest.NewReservation("b", "10.0.1.1", nil, "n")

	h.Create(ctx, event.CreateEvent{Object: a1, IsInInitialList: true}, q)
	h.Create(ctx, event.CreateEvent{Object: a2}, q)
	h.Create(ctx, event.CreateEvent{Object: b1}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: a1, ObjectNew: a1}, q) // no pool change: nothing
	if tally.count("a") != 2 || tally.count("b") != 1 || q.Len() != 2 {
		t.Fatalf("after creates: a=%d b=%d queued=%d, want 2, 1, 2", tally.count("a"), tally.count("b"), q.Len())
	}
	moved := b1.DeepCopy()
	moved.Spec.Pool = "c"
	h.Update(ctx, event.UpdateEvent{ObjectOld: b1, ObjectNew: moved}, q)
	if tally.count("b") != 0 || tally.count("c") != 1 || q.Len() != 3 {
		t.Fatalf("after a move: b=%d c=%d queued=%d, want 0, 1, 3", tally.count("b"), tally.count("c"), q.Len())
	}
	h.Delete(ctx, event.DeleteEvent{Object: a1, DeleteStateUnknown: true}, q)
	h.Delete(ctx, event.DeleteEvent{Object: moved}, q)
	if tally.count("a") != 1 || tally.count("c") != 0 || len(tally.counts) != 1 {
		t.Fatalf("after deletes: a=%d c=%d pools=%v, want 1, 0 and only a", tally.count("a"), tally.count("c"), tally.counts)
	}
	// Objects that are not reservations, or have no pool, are not counted.
	h.Create(ctx, event.CreateEvent{Object: &corev1.Pod{}}, q)
	h.Create(ctx, event.CreateEvent{Object: ctrltest.NewReservation("", "10.0.0.9", nil, "n")}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: &corev1.Pod{}, ObjectNew: a2}, q)
	h.Delete(ctx, event.DeleteEvent{Object: &corev1.Pod{}}, q)
	if len(tally.counts) != 1 || tally.count("a") != 1 {
		t.Fatalf("foreign objects changed the tally: %v", tally.counts)
	}
}
