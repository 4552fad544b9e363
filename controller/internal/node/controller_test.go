package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/gcpolicy"
)

func TestDeletedNodesSlicesAndReservationsAreReclaimed(t *testing.T) {
	f := newFixture(t, nil)
	f.node("node-a")
	doomed := f.node("node-b")
	pool := &ipamv1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: "sliced"},
		Spec:       ipamv1.IPPoolSpec{Range: "10.20.0.0/24", SliceSize: 28},
	}
	f.create(pool)
	kept := f.slice(pool.Name, 0, "10.20.0.0/28", "node-a")
	keptRes := f.reservation(pool.Name, "10.20.0.1", f.pod("on-a", corev1.PodRunning, "10.20.0.1"), "node-a")
	slicesB := []*ipamv1.IPPoolSlice{f.slice(pool.Name, 1, "10.20.0.16/28", "node-b"), f.slice(pool.Name, 2, "10.20.0.32/28", "node-b")}
	// The pods of node-b still show in the API (nothing deletes them here), with their addresses
	// in network-status, so only the node's deletion can release their reservations.
	resB := []*ipamv1.OverlappingRangeIPReservation{
		f.reservation(pool.Name, "10.20.0.17", f.pod("on-b-1", corev1.PodRunning, "10.20.0.17"), "node-b"),
		f.reservation(pool.Name, "10.20.0.33", f.pod("on-b-2", corev1.PodRunning, "10.20.0.33"), "node-b"),
	}
	// node-c was deleted while no controller ran: its slice and reservation are left over.
	sliceC := f.slice(pool.Name, 3, "10.20.0.48/28", "node-c")
	resC := f.reservation(pool.Name, "10.20.0.49", nil, "node-c")
	opts := testOptions()
	opts.SliceGrace = time.Hour // only node deletion returns slices in this test
	m := mustStartManager(t, nil, opts)

	eventually(t, 5*time.Second, "node-c's leftover reservation is reclaimed", gone(resC))
	eventually(t, 5*time.Second, "node-c's leftover slice is reclaimed", gone(sliceC))
	consistently(t, time.Second, "node-b's reservation stays while node-b exists", exists(resB[0]))

	if err := direct.Delete(context.Background(), doomed); err != nil {
		t.Fatal(err)
	}
	for _, r := range resB {
		eventually(t, 5*time.Second, "node-b's reservation "+r.Name+" is released", gone(r))
	}
	for _, s := range slicesB {
		eventually(t, 5*time.Second, "node-b's slice "+s.Name+" goes back to the pool", gone(s))
	}
	consistently(t, time.Second, "node-a's slice stays", exists(kept))
	consistently(t, 100*time.Millisecond, "node-a's reservation stays", exists(keptRes))

	// The counters move just after each delete returns, so what is seen gone may not be counted yet.
	eventually(t, 5*time.Second, "the releases and returns are counted", func() error {
		if got := m.releases(t, gcpolicy.ReasonNodeDeleted, false); got != 3 {
			return fmt.Errorf("netpool_gc_releases_total{reason=%q} = %v, want 3", gcpolicy.ReasonNodeDeleted, got)
		}
		if got := m.metric(t, "netpool_slices_returned_total", map[string]string{"reason": gcpolicy.ReasonNodeDeleted}); got != 3 {
			return fmt.Errorf("netpool_slices_returned_total{reason=%q} = %v, want 3", gcpolicy.ReasonNodeDeleted, got)
		}
		return nil
	})
	eventually(t, 5*time.Second, "each returned slice is an Event on the pool", func() error {
		return wantEvent(t, pool.UID, corev1.EventTypeNormal, EventSliceReturned, slicesB[0].Name, "node node-b was deleted")
	})
}
