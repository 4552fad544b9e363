package poolstatus

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/harness"
	"github.com/netpool/netpool/test/poll"
)

func TestWriteInterval(t *testing.T) {
	tests := []struct {
		name     string
		interval time.Duration
		fanout   float64
		nodes    int
		want     time.Duration
	}{
		{"small cluster: the interval decides", time.Second, 200, 100, time.Second},
		{"at the fan-out bound", time.Second, 200, 200, time.Second},
		{"2,000 nodes", time.Second, 200, 2000, 10 * time.Second},
		{"5,000 nodes", time.Second, 200, 5000, 25 * time.Second},
		{"a longer interval still wins", time.Minute, 200, 5000, time.Minute},
		{"fan-out off", time.Second, 0, 5000, time.Second},
		{"no node counted yet", time.Second, 200, 0, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := writeInterval(tt.interval, tt.fanout, tt.nodes); got != tt.want {
				t.Fatalf("writeInterval(%s, %v, %d) = %s, want %s", tt.interval, tt.fanout, tt.nodes, got, tt.want)
			}
		})
	}
}

// In a cluster of 3,000 nodes with a fan-out of 200 deliveries a second, a changed pool waits
// 15 s after its last status write, not the 1 s interval.
func TestPoolStatusWritesStretchWithTheNodes(t *testing.T) {
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}, Spec: ipamv1.IPPoolSpec{Range: "10.0.0.0/29"}}
	writes := 0
	c := statusWritesCounted(t, &writes, pool)
	clk := ctrltest.NewClock()
	r := newStatusReconciler(t, c, clk)
	r.Fanout, r.Nodes = 200, func() int { return 3000 }
	reconcileWants := func(want ctrl.Result) {
		t.Helper()
		got, err := r.Reconcile(context.Background(), poolRequest("p"))
		if err != nil || got != want {
			t.Fatalf("Reconcile = %+v, %v; want %+v", got, err, want)
		}
	}
	reconcileWants(ctrl.Result{})
	r.tally.add("p", 1)
	clk.Advance(2 * time.Second)
	reconcileWants(ctrl.Result{RequeueAfter: 13 * time.Second})
	if writes != 1 {
		t.Fatalf("%d status writes within the stretched interval, want 1", writes)
	}
	clk.Advance(13 * time.Second)
	reconcileWants(ctrl.Result{})
	if writes != 2 {
		t.Fatalf("%d status writes after the stretched interval, want 2", writes)
	}
}

// The reconciler counts the cluster's Nodes from the manager's informer on a real API server:
// Nodes made and deleted move the count that stretches the interval.
func TestPoolStatusCountsTheNodes(t *testing.T) {
	harness.SkipShort(t, "needs an API server")
	var r *Reconciler
	m := ctrltest.StartManager(t, nil, ctrltest.Options{PoolStatusInterval: 50 * time.Millisecond}, func(d ctrltest.Deps) error {
		r = &Reconciler{Client: d.Mgr.GetClient(), Live: d.Mgr.GetAPIReader(), Metrics: d.Metrics,
			Interval: 50 * time.Millisecond, Fanout: 1}
		return r.SetupWithManager(d.Mgr)
	})
	c := m.Mgr.GetClient()
	ctx := context.Background()
	// The shared API server may hold other tests' Nodes: start from the count the informer agrees on.
	var base int
	poll.Eventually(t, time.Minute, "the Nodes there are counted", func() error {
		var live corev1.NodeList
		if err := m.Mgr.GetAPIReader().List(ctx, &live); err != nil {
			return err
		}
		if base = len(live.Items); r.Nodes() != base {
			return fmt.Errorf("%d nodes counted, %d on the API server", r.Nodes(), base)
		}
		return nil
	})
	var names []string
	for i := range 3 {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: fmt.Sprintf("fanout-%d-", i)}}
		if err := c.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n.Name)
	}
	poll.Eventually(t, time.Minute, "three more Nodes counted", func() error {
		if n := r.Nodes(); n != base+3 {
			return fmt.Errorf("%d nodes, want %d", n, base+3)
		}
		return nil
	})
	if got, want := r.interval(), time.Duration(base+3)*time.Second; got != want {
		t.Fatalf("interval %s with %d nodes and a fan-out of 1, want %s", got, base+3, want)
	}
	if err := c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: names[0]}}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, time.Minute, "a deleted Node uncounted", func() error {
		if n := r.Nodes(); n != base+2 {
			return fmt.Errorf("%d nodes, want %d", n, base+2)
		}
		return nil
	})
}
