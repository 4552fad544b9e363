package poolstatus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/poll"
)

// TestDeletingAPoolInUseWaitsForItsReservations deletes a pool that two reservations name: the
// API server accepts the delete, but the controller's finalizer keeps the pool, whose status and a
// Warning Event say why, until both are released; then the pool and its slices go. A pool that
// holds nothing goes at once.
func TestDeletingAPoolInUseWaitsForItsReservations(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	f.Node("node-a")
	held := f.Pool("held", "10.21.0.0/29", "")
	idle := f.Pool("idle", "10.22.0.0/29", "")
	startManager(t, ctrltest.TestOptions())

	for _, p := range []*ipamv1.IPPool{held, idle} {
		poll.Eventually(t, 10*time.Second, "the controller puts its finalizer on "+p.Name, func() error {
			got := &ipamv1.IPPool{}
			if err := f.C.Get(context.Background(), client.ObjectKeyFromObject(p), got); err != nil {
				return err
			}
			if !controllerutil.ContainsFinalizer(got, ipamv1.IPPoolFinalizer) {
				return fmt.Errorf("finalizers %v, want %s", got.Finalizers, ipamv1.IPPoolFinalizer)
			}
			return nil
		})
	}
	r1 := f.Reservation(held.Name, "10.21.0.1", nil, "node-a")
	r2 := f.Reservation(held.Name, "10.21.0.2", nil, "node-a")
	slice := f.Slice(held.Name, 0, "10.21.0.0/29", "node-a")

	if err := f.C.Delete(context.Background(), idle); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 10*time.Second, "a pool that holds nothing goes at once", f.Gone(idle))

	if err := f.C.Delete(context.Background(), held); err != nil {
		t.Fatalf("deleting a pool in use: %v, want accepted (it waits)", err)
	}
	poll.Eventually(t, 10*time.Second, "the deleted pool says why it waits", func() error {
		got := &ipamv1.IPPool{}
		if err := f.C.Get(context.Background(), client.ObjectKeyFromObject(held), got); err != nil {
			return err
		}
		if got.DeletionTimestamp.IsZero() {
			return errors.New("no deletion mark")
		}
		c := meta.FindStatusCondition(got.Status.Conditions, ipamv1.IPPoolDeletionBlockedCondition)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ipamv1.IPPoolReservationsHeldReason ||
			!strings.Contains(c.Message, "2 held") || !strings.Contains(c.Message, "--field-selector spec.pool=held") {
			return fmt.Errorf("DeletionBlocked = %+v", c)
		}
		if ready := meta.FindStatusCondition(got.Status.Conditions, ipamv1.IPPoolReadyCondition); ready == nil ||
			ready.Status != metav1.ConditionFalse || ready.Reason != ipamv1.IPPoolReservationsHeldReason {
			return fmt.Errorf("Ready = %+v, want False/%s", ready, ipamv1.IPPoolReservationsHeldReason)
		}
		return nil
	})
	poll.Eventually(t, 5*time.Second, "a Warning Event on the pool says why deletion waits", func() error {
		return f.WantEvent(held.UID, corev1.EventTypeWarning, EventPoolDeletionBlocked, "IPPool held", "2 held", ipamv1.IPPoolFinalizer)
	})

	// One release is not enough; the second lets the pool and its slice go.
	if err := f.C.Delete(context.Background(), r1); err != nil {
		t.Fatal(err)
	}
	poll.Consistently(t, time.Second, "the pool stays while a reservation names it", f.Exists(held))
	if err := f.C.Delete(context.Background(), r2); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 10*time.Second, "the pool goes with its last reservation", f.Gone(held))
	poll.Eventually(t, 5*time.Second, "its slice goes with it", f.Gone(slice))
	if n := len(f.EventsFor(held.UID, corev1.EventTypeWarning, EventPoolDeletionBlocked)); n != 1 {
		t.Errorf("%d DeletionBlocked Events, want 1", n)
	}
}

// TestPoolTurningExhaustedIsAWarningEvent fills a six-address pool: one Warning Event says so,
// and no second one follows while it stays exhausted (even as its counts change). When it frees
// an address and fills again, that is a second transition, reported again.
func TestPoolTurningExhaustedIsAWarningEvent(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	f.Node("node-a")
	small := f.Pool("fills", "10.23.0.0/29", "") // 6 usable addresses
	startManager(t, ctrltest.TestOptions())

	var held []client.Object
	for i := 1; i <= 6; i++ {
		held = append(held, f.Reservation(small.Name, fmt.Sprintf("10.23.0.%d", i), nil, "node-a"))
	}
	poll.Eventually(t, 10*time.Second, "a Warning Event says the pool is exhausted", func() error {
		return f.WantEvent(small.UID, corev1.EventTypeWarning, EventPoolExhausted,
			"IPPool fills is exhausted: 0 of 6 addresses free (6 allocated)", "code 100")
	})
	// Over capacity (an operator's hand-made reservation): the counts change, the pool stays
	// exhausted, and no second Event is recorded (the recorder would make it a series of 2).
	held = append(held, f.Reservation(small.Name, "10.23.0.7", nil, "node-a"))
	wantConditions(f, small, "Ready=False/PoolExhausted Exhausted=True/PoolExhausted Invalid=False/ValidSpec", "(7 allocated)")
	poll.Consistently(t, time.Second, "one Event while the pool stays exhausted", func() error {
		return wantExhaustedEvents(f, small.UID, 1)
	})

	for _, r := range held[5:] {
		if err := f.C.Delete(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	wantConditions(f, small, "Ready=True/Available Exhausted=False/AddressesAvailable Invalid=False/ValidSpec", "1 of 6 addresses free")
	f.Reservation(small.Name, "10.23.0.6", nil, "node-a")
	poll.Eventually(t, 10*time.Second, "filling again is reported again", func() error {
		return wantExhaustedEvents(f, small.UID, 2)
	})
	// The Event of a cluster-scoped pool is in default: the API server accepts an events.k8s.io
	// Event about an object without a namespace only in default or kube-system, never in the
	// controller's own namespace (docs/controller.md, Events).
	var list eventsv1.EventList
	if err := f.C.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, e := range list.Items {
		if e.Regarding.UID != small.UID {
			continue
		}
		found++
		if e.Namespace != metav1.NamespaceDefault || e.Regarding.Namespace != "" {
			t.Errorf("Event %s/%s regarding %q/%s, want it in default about the pool", e.Namespace, e.Name, e.Regarding.Namespace, e.Regarding.Name)
		}
	}
	if found == 0 {
		t.Error("no Event about the pool")
	}
	moved := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: f.NS, Name: "pool-event-elsewhere"},
		EventTime: metav1.NowMicro(), ReportingController: "netpool-controller", ReportingInstance: "test", Action: "Test",
		Reason: EventPoolExhausted, Type: corev1.EventTypeWarning,
		Regarding: corev1.ObjectReference{APIVersion: ipamv1.GroupVersion.String(), Kind: "IPPool", Name: small.Name, UID: small.UID}}
	if err := f.C.Create(context.Background(), moved); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "does not match event.namespace") {
		t.Errorf("an Event about the pool in namespace %s: %v, want the API server to refuse it", f.NS, err)
	}
}

// wantExhaustedEvents checks that the PoolExhausted Events about uid count n occurrences: the
// Event's series count, or 1 for an Event without a series.
func wantExhaustedEvents(f *ctrltest.Fixture, uid types.UID, n int32) error {
	f.T.Helper()
	var list eventsv1.EventList
	if err := f.C.List(context.Background(), &list); err != nil {
		return err
	}
	var got int32
	for _, e := range list.Items {
		if e.Regarding.UID != uid || e.Reason != EventPoolExhausted {
			continue
		}
		if e.Series != nil {
			got += e.Series.Count
		} else {
			got++
		}
	}
	if got != n {
		return fmt.Errorf("%d PoolExhausted occurrences, want %d", got, n)
	}
	return nil
}
