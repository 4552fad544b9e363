package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

func TestEmptySlicesGoBackToThePoolAfterTheGrace(t *testing.T) {
	f := newFixture(t, nil)
	f.node("node-a")
	pool := &ipamv1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: "idle"},
		Spec:       ipamv1.IPPoolSpec{Range: "10.21.0.0/24", SliceSize: 28},
	}
	f.create(pool)
	busy := f.slice(pool.Name, 0, "10.21.0.0/28", "node-a")
	res := f.reservation(pool.Name, "10.21.0.3", f.pod("p", corev1.PodRunning, "10.21.0.3"), "node-a")
	idle := f.slice(pool.Name, 1, "10.21.0.16/28", "node-a")
	opts := testOptions()
	opts.SliceGrace = 2 * time.Second
	m := mustStartManager(t, nil, opts)
	start := time.Now()

	eventually(t, 5*time.Second, "the idle slice goes back", gone(idle))
	if waited := time.Since(start); waited < opts.SliceGrace-200*time.Millisecond {
		t.Errorf("the idle slice went back after %s, before the %s grace", waited, opts.SliceGrace)
	}
	consistently(t, 3*time.Second, "a slice holding a reservation of its node stays", exists(busy))

	// The node releases its last address in the busy slice: it goes back once idle for the grace.
	if err := direct.Delete(context.Background(), res); err != nil {
		t.Fatal(err)
	}
	consistently(t, opts.SliceGrace-500*time.Millisecond, "a slice empty for less than the grace stays", exists(busy))
	eventually(t, 5*time.Second, "the emptied slice goes back", gone(busy))
	// The counter moves just after the delete returns, so a slice seen gone may not be counted yet.
	eventually(t, 5*time.Second, "both returns are counted", func() error {
		if got := m.metric(t, "netpool_slices_returned_total", map[string]string{"reason": ReasonSliceEmpty}); got != 2 {
			return fmt.Errorf("netpool_slices_returned_total{reason=%q} = %v, want 2", ReasonSliceEmpty, got)
		}
		return nil
	})
	eventually(t, 5*time.Second, "the return is an Event on the pool", func() error {
		return wantEvent(t, pool.UID, corev1.EventTypeNormal, EventSliceReturned, idle.Name, "held no reservation of node node-a")
	})
}
