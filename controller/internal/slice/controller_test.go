package slice

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/controller/internal/release"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/gcpolicy"
	"github.com/netpool/netpool/test/poll"
)

func TestEmptySlicesGoBackToThePoolAfterTheGrace(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	f.Node("node-a")
	pool := &ipamv1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: "idle"},
		Spec:       ipamv1.IPPoolSpec{Range: "10.21.0.0/24", SliceSize: 28},
	}
	f.Create(pool)
	busy := f.Slice(pool.Name, 0, "10.21.0.0/28", "node-a")
	res := f.Reservation(pool.Name, "10.21.0.3", f.Pod("p", corev1.PodRunning, "10.21.0.3"), "node-a")
	idle := f.Slice(pool.Name, 1, "10.21.0.16/28", "node-a")
	opts := ctrltest.TestOptions()
	opts.SliceGrace = 2 * time.Second
	m := startManager(t, opts)
	start := time.Now()

	poll.Eventually(t, 5*time.Second, "the idle slice goes back", f.Gone(idle))
	if waited := time.Since(start); waited < opts.SliceGrace-200*time.Millisecond {
		t.Errorf("the idle slice went back after %s, before the %s grace", waited, opts.SliceGrace)
	}
	poll.Consistently(t, 3*time.Second, "a slice holding a reservation of its node stays", f.Exists(busy))

	// The node releases its last address in the busy slice: it goes back once idle for the grace.
	if err := f.C.Delete(context.Background(), res); err != nil {
		t.Fatal(err)
	}
	poll.Consistently(t, opts.SliceGrace-500*time.Millisecond, "a slice empty for less than the grace stays", f.Exists(busy))
	poll.Eventually(t, 5*time.Second, "the emptied slice goes back", f.Gone(busy))
	// The counter moves just after the delete returns, so a slice seen gone may not be counted yet.
	poll.Eventually(t, 5*time.Second, "both returns are counted", func() error {
		if got := m.Metric(t, "netpool_slices_returned_total", map[string]string{"reason": gcpolicy.ReasonSliceEmpty}); got != 2 {
			return fmt.Errorf("netpool_slices_returned_total{reason=%q} = %v, want 2", gcpolicy.ReasonSliceEmpty, got)
		}
		return nil
	})
	poll.Eventually(t, 5*time.Second, "the return is an Event on the pool", func() error {
		return f.WantEvent(pool.UID, corev1.EventTypeNormal, release.EventSliceReturned, idle.Name, "held no reservation of node node-a")
	})
}
