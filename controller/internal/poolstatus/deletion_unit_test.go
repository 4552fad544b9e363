package poolstatus

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// The deletion phase's error paths and the transition Events, over a fake client.

func TestPoolDeletionFailures(t *testing.T) {
	live := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}, Spec: ipamv1.IPPoolSpec{Range: "10.0.0.0/24"}}
	now := metav1.Now()
	deleted := live.DeepCopy()
	deleted.Finalizers = []string{ipamv1.IPPoolFinalizer}
	deleted.DeletionTimestamp = &now
	slice := &ipamv1.IPPoolSlice{ObjectMeta: metav1.ObjectMeta{Name: "p.0"}, Spec: ipamv1.IPPoolSliceSpec{Pool: "p", Range: "10.0.0.0/26", Node: "n"}}
	failPatch := interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
		return ctrltest.ErrExpected
	}}
	tests := []struct {
		name    string
		pool    *ipamv1.IPPool
		funcs   interceptor.Funcs
		wantErr string
	}{
		{name: "adding the finalizer", pool: live, funcs: failPatch,
			wantErr: "failed to add the finalizer to IPPool p: injected failure"},
		{name: "removing the finalizer", pool: deleted, funcs: failPatch,
			wantErr: "failed to remove the finalizer of IPPool p: injected failure"},
		{name: "listing the reservations", pool: deleted, wantErr: "failed to list the reservations of IPPool p: injected failure",
			funcs: interceptor.Funcs{List: func(_ context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
				if _, ok := l.(*ipamv1.OverlappingRangeIPReservationList); ok {
					return ctrltest.ErrExpected
				}
				return c.List(context.Background(), l, opts...)
			}}},
		{name: "listing the slices", pool: deleted, wantErr: "failed to list the slices of IPPool p: injected failure",
			funcs: interceptor.Funcs{List: func(_ context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
				if _, ok := l.(*ipamv1.IPPoolSliceList); ok {
					return ctrltest.ErrExpected
				}
				return c.List(context.Background(), l, opts...)
			}}},
		{name: "deleting a slice", pool: deleted, wantErr: "failed to delete slice p.0 of the deleted IPPool p: injected failure",
			funcs: interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
				return ctrltest.ErrExpected
			}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newStatusReconciler(t, ctrltest.FakeClient(t, tt.funcs, tt.pool.DeepCopy(), slice.DeepCopy()), ctrltest.NewClock())
			_, err := r.Reconcile(context.Background(), poolRequest("p"))
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestPoolDeletionHeldByAReservation(t *testing.T) {
	now := metav1.Now()
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1, Finalizers: []string{ipamv1.IPPoolFinalizer},
		DeletionTimestamp: &now}, Spec: ipamv1.IPPoolSpec{Range: "10.0.0.0/24"}}
	rec := &ctrltest.FakeRecorder{}
	c := ctrltest.FakeClient(t, interceptor.Funcs{}, pool, ctrltest.NewReservation("p", "10.0.0.7", nil, "n"))
	r := newStatusReconciler(t, c, ctrltest.NewClock())
	r.Recorder = rec
	r.tally.add("p", 1)
	res, err := r.Reconcile(context.Background(), poolRequest("p"))
	if err != nil || res.RequeueAfter != deletionRecheck {
		t.Fatalf("Reconcile = %+v, %v; want a recheck after %s", res, err, deletionRecheck)
	}
	got := &ipamv1.IPPool{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "p"}, got); err != nil {
		t.Fatalf("the held pool went: %v", err)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, ipamv1.IPPoolDeletionBlockedCondition) {
		t.Fatalf("conditions %+v, want DeletionBlocked", got.Status.Conditions)
	}
	evs := rec.All()
	if len(evs) != 1 || evs[0].Reason != EventPoolDeletionBlocked || evs[0].EventType != corev1.EventTypeWarning ||
		!strings.Contains(evs[0].Note, "1 held") {
		t.Fatalf("events %+v, want one DeletionBlocked Warning", evs)
	}
}

func TestRecordTransitions(t *testing.T) {
	withConditions := func(cs ...metav1.Condition) *ipamv1.IPPool {
		return &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: ipamv1.IPPoolStatus{Conditions: cs}}
	}
	exhausted := metav1.Condition{Type: ipamv1.IPPoolExhaustedCondition, Status: metav1.ConditionTrue, Message: "0 of 6 addresses free (6 allocated)"}
	available := metav1.Condition{Type: ipamv1.IPPoolExhaustedCondition, Status: metav1.ConditionFalse}
	blocked := metav1.Condition{Type: ipamv1.IPPoolDeletionBlockedCondition, Status: metav1.ConditionTrue, Message: "waits"}
	tests := []struct {
		name          string
		before, after *ipamv1.IPPool
		want          []string
	}{
		{"turns exhausted", withConditions(available), withConditions(exhausted),
			[]string{"PoolExhausted: IPPool p is exhausted: 0 of 6 addresses free (6 allocated); ADDs from it fail with code 100 until an address is released or the pool is widened"}},
		{"first status already exhausted", withConditions(), withConditions(exhausted), []string{"PoolExhausted: IPPool p is exhausted: 0 of 6 addresses free (6 allocated); ADDs from it fail with code 100 until an address is released or the pool is widened"}},
		{"stays exhausted", withConditions(exhausted), withConditions(exhausted), nil},
		{"recovers", withConditions(exhausted), withConditions(available), nil},
		{"deletion starts to wait", withConditions(exhausted), withConditions(exhausted, blocked), []string{"DeletionBlocked: IPPool p: waits"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &ctrltest.FakeRecorder{}
			recordTransitions(rec, nil, tt.before, tt.after)
			var got []string
			for _, e := range rec.All() {
				if e.EventType != corev1.EventTypeWarning {
					t.Errorf("event type %s", e.EventType)
				}
				got = append(got, e.Reason+": "+e.Note)
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("events %q, want %q", got, tt.want)
			}
		})
	}
	recordTransitions(nil, nil, withConditions(), withConditions(exhausted)) // no recorder: nothing, no panic

	// A stale cache shows the reconciler its old status twice: the memo reports the turn once,
	// and again only after the condition was seen False.
	rec, memo := &ctrltest.FakeRecorder{}, &transitionMemo{}
	for range 2 {
		recordTransitions(rec, memo, withConditions(available), withConditions(exhausted))
	}
	if n := len(rec.All()); n != 1 {
		t.Fatalf("a stale before twice: %d Events, want 1", n)
	}
	recordTransitions(rec, memo, withConditions(exhausted), withConditions(available))
	recordTransitions(rec, memo, withConditions(available), withConditions(exhausted))
	if n := len(rec.All()); n != 2 {
		t.Fatalf("after recovering and filling again: %d Events, want 2", n)
	}
}

func TestDeletionOrFinalizersChanged(t *testing.T) {
	now := metav1.Now()
	plain := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	final := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p", Finalizers: []string{ipamv1.IPPoolFinalizer}}}
	deleted := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p", Finalizers: []string{ipamv1.IPPoolFinalizer}, DeletionTimestamp: &now}}
	for _, tt := range []struct {
		name     string
		old, new client.Object
		want     bool
	}{
		{"nothing", final, final, false},
		{"finalizer added", plain, final, true},
		{"deleted", final, deleted, true},
		{"no old object", nil, final, false},
	} {
		if got := deletionOrFinalizersChanged(event.UpdateEvent{ObjectOld: tt.old, ObjectNew: tt.new}); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
