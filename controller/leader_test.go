package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/internal/gcpolicy"
)

func TestLeaderElectionOneLeaderAndTakeOverWhenItDies(t *testing.T) {
	f := newFixture(t, nil)
	f.node("node-a")
	pool := f.pool("leader", "10.50.0.0/24", "")
	opts := testOptions()
	opts.LeaderElection = true
	opts.LeaderElectionID = "netpool-controller-test"
	opts.LeaderElectionNamespace = f.ns
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 3*time.Second, 2*time.Second, 250*time.Millisecond
	opts.ReleaseLeaseOnStop = false // stopping acts as a crash: the Lease must expire
	a := mustStartManager(t, nil, opts)
	b := mustStartManager(t, nil, opts)

	var leader, follower *runningManager
	eventually(t, 15*time.Second, "one manager is elected", func() error {
		switch {
		case elected(a) && elected(b):
			t.Fatal("both managers are leaders")
		case elected(a):
			leader, follower = a, b
		case elected(b):
			leader, follower = b, a
		default:
			return errors.New("no leader yet")
		}
		return nil
	})
	consistently(t, 2*time.Second, "the other manager stays a follower", func() error {
		if elected(follower) {
			return errors.New("two leaders")
		}
		return nil
	})

	// Only the leader reconciles: it releases the first leak.
	gone1 := f.pod("gone-1", corev1.PodRunning, "10.50.0.5")
	res1 := f.reservation(pool.Name, "10.50.0.5", gone1, "node-a")
	f.deletePod(gone1)
	eventually(t, 10*time.Second, "the leader releases the leak", gone(res1))
	if l, fl := leader.releases(t, gcpolicy.ReasonPodDeleted, false), follower.releases(t, gcpolicy.ReasonPodDeleted, false); l != 1 || fl != 0 {
		t.Fatalf("releases: leader %v, follower %v; want 1 and 0", l, fl)
	}

	// The leader dies without giving the Lease up; the follower takes over once it expires.
	holder := leaseHolder(t, opts)
	leader.stop(t)
	died := time.Now()
	eventually(t, 15*time.Second, "the follower takes over", func() error {
		if !elected(follower) {
			return errors.New("not elected yet")
		}
		return nil
	})
	t.Logf("took over %s after the leader died (lease duration %s)", time.Since(died).Round(time.Millisecond), opts.LeaseDuration)
	if h := leaseHolder(t, opts); h == holder {
		t.Errorf("the Lease is still held by %s", h)
	}
	gone2 := f.pod("gone-2", corev1.PodRunning, "10.50.0.6")
	res2 := f.reservation(pool.Name, "10.50.0.6", gone2, "node-a")
	f.deletePod(gone2)
	eventually(t, 10*time.Second, "the new leader releases the next leak", gone(res2))
	if got := follower.releases(t, gcpolicy.ReasonPodDeleted, false); got != 1 {
		t.Errorf("the new leader's releases = %v, want 1", got)
	}
}

// elected reports whether m holds the leader Lease.
func elected(m *runningManager) bool {
	select {
	case <-m.mgr.Elected():
		return true
	default:
		return false
	}
}

// leaseHolder returns the holder of the leader election Lease.
func leaseHolder(t *testing.T, opts Options) string {
	t.Helper()
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: opts.LeaderElectionNamespace, Name: opts.LeaderElectionID}
	if err := direct.Get(context.Background(), key, lease); err != nil {
		t.Fatalf("reading the Lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return fmt.Sprint(*lease.Spec.HolderIdentity)
}
