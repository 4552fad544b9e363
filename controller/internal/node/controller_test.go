package node

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

func TestDeletedNodesSlicesAndReservationsAreReclaimed(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	f.Node("node-a")
	doomed := f.Node("node-b")
	pool := &ipamv1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: "sliced"},
		Spec:       ipamv1.IPPoolSpec{Range: "10.20.0.0/24", SliceSize: 28},
	}
	f.Create(pool)
	kept := f.Slice(pool.Name, 0, "10.20.0.0/28", "node-a")
	keptRes := f.Reservation(pool.Name, "10.20.0.1", f.Pod("on-a", corev1.PodRunning, "10.20.0.1"), "node-a")
	slicesB := []*ipamv1.IPPoolSlice{f.Slice(pool.Name, 1, "10.20.0.16/28", "node-b"), f.Slice(pool.Name, 2, "10.20.0.32/28", "node-b")}
	// The pods of node-b still show in the API (nothing deletes them here), with their addresses
	// in network-status, so only the node's deletion can release their reservations.
	resB := []*ipamv1.OverlappingRangeIPReservation{
		f.Reservation(pool.Name, "10.20.0.17", f.Pod("on-b-1", corev1.PodRunning, "10.20.0.17"), "node-b"),
		f.Reservation(pool.Name, "10.20.0.33", f.Pod("on-b-2", corev1.PodRunning, "10.20.0.33"), "node-b"),
	}
	// node-c was deleted while no controller ran: its slice and reservation are left over.
	sliceC := f.Slice(pool.Name, 3, "10.20.0.48/28", "node-c")
	resC := f.Reservation(pool.Name, "10.20.0.49", nil, "node-c")
	opts := ctrltest.TestOptions()
	opts.SliceGrace = time.Hour // only node deletion returns slices in this test
	m := startManager(t, opts)

	poll.Eventually(t, 5*time.Second, "node-c's leftover reservation is reclaimed", f.Gone(resC))
	poll.Eventually(t, 5*time.Second, "node-c's leftover slice is reclaimed", f.Gone(sliceC))
	poll.Consistently(t, time.Second, "node-b's reservation stays while node-b exists", f.Exists(resB[0]))

	if err := f.C.Delete(context.Background(), doomed); err != nil {
		t.Fatal(err)
	}
	for _, r := range resB {
		poll.Eventually(t, 5*time.Second, "node-b's reservation "+r.Name+" is released", f.Gone(r))
	}
	for _, s := range slicesB {
		poll.Eventually(t, 5*time.Second, "node-b's slice "+s.Name+" goes back to the pool", f.Gone(s))
	}
	poll.Consistently(t, time.Second, "node-a's slice stays", f.Exists(kept))
	poll.Consistently(t, 100*time.Millisecond, "node-a's reservation stays", f.Exists(keptRes))

	// The counters move just after each delete returns, so what is seen gone may not be counted yet.
	poll.Eventually(t, 5*time.Second, "the releases and returns are counted", func() error {
		if got := m.Releases(t, gcpolicy.ReasonNodeDeleted, false); got != 3 {
			return fmt.Errorf("netpool_gc_releases_total{reason=%q} = %v, want 3", gcpolicy.ReasonNodeDeleted, got)
		}
		if got := m.Metric(t, "netpool_slices_returned_total", map[string]string{"reason": gcpolicy.ReasonNodeDeleted}); got != 3 {
			return fmt.Errorf("netpool_slices_returned_total{reason=%q} = %v, want 3", gcpolicy.ReasonNodeDeleted, got)
		}
		return nil
	})
	poll.Eventually(t, 5*time.Second, "each returned slice is an Event on the pool", func() error {
		return f.WantEvent(pool.UID, corev1.EventTypeNormal, release.EventSliceReturned, slicesB[0].Name, "node node-b was deleted")
	})
}
