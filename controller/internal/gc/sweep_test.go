package gc

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/netpool/netpool/controller/internal/ctrltest"
)

func TestSweepQueuesEveryReservation(t *testing.T) {
	c := ctrltest.FakeClient(t, interceptor.Funcs{},
		ctrltest.NewReservation("p", "10.0.0.5", nil, "a"), ctrltest.NewReservation("p", "10.0.0.6", nil, "b"), ctrltest.NewReservation("q", "10.0.1.5", nil, "a"))
	q := workqueue.NewTyped[reconcile.Request]()
	defer q.ShutDown()
	n, err := sweep(context.Background(), c, q)
	if err != nil || n != 3 || q.Len() != 3 {
		t.Fatalf("sweep = %d, %v with %d queued; want 3 queued", n, err, q.Len())
	}
	// Queuing again collapses with what is still queued.
	if _, err := sweep(context.Background(), c, q); err != nil || q.Len() != 3 {
		t.Fatalf("a second sweep left %d queued (%v), want 3", q.Len(), err)
	}
}

func TestSweepReportsAListFailure(t *testing.T) {
	c := ctrltest.FakeClient(t, interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		return ctrltest.ErrExpected
	}})
	q := workqueue.NewTyped[reconcile.Request]()
	defer q.ShutDown()
	if _, err := sweep(context.Background(), c, q); err == nil || err.Error() != "failed to list reservations: injected failure" {
		t.Fatalf("error %v", err)
	}
}

func TestSweepSourceSweepsEveryIntervalAndSurvivesFailures(t *testing.T) {
	for _, tt := range []struct {
		name       string
		funcs      interceptor.Funcs
		wantSweeps bool
	}{
		{name: "sweeps", wantSweeps: true},
		{name: "a failing list is retried next interval", funcs: interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return ctrltest.ErrExpected
		}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := ctrltest.MustMetrics(t)
			c := ctrltest.FakeClient(t, tt.funcs, ctrltest.NewReservation("p", "10.0.0.5", nil, "a"))
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			ctx, cancel := context.WithCancel(context.Background())
			if err := sweepSource(c, 10*time.Millisecond, m).Start(ctx, q); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
			cancel()
			sweeps := ctrltest.Value(t, m.Sweeps)
			if tt.wantSweeps != (sweeps > 0) || tt.wantSweeps != (q.Len() == 1) {
				t.Fatalf("%v sweeps, %d queued", sweeps, q.Len())
			}
		})
	}
}
