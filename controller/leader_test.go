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

	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/internal/gcpolicy"
	"github.com/netpool/netpool/test/poll"
)

func TestLeaderElectionOneLeaderAndTakeOverWhenItDies(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	f.Node("node-a")
	pool := f.Pool("leader", "10.50.0.0/24", "")
	opts := testOptions()
	opts.LeaderElection = true
	opts.LeaderElectionID = "netpool-controller-test"
	opts.LeaderElectionNamespace = f.NS
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 3*time.Second, 2*time.Second, 250*time.Millisecond
	opts.ReleaseLeaseOnStop = false // stopping acts as a crash: the Lease must expire
	a := mustStartManager(t, nil, opts)
	b := mustStartManager(t, nil, opts)

	var leader, follower *ctrltest.Manager
	poll.Eventually(t, 15*time.Second, "one manager is elected", func() error {
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
	poll.Consistently(t, 2*time.Second, "the other manager stays a follower", func() error {
		if elected(follower) {
			return errors.New("two leaders")
		}
		return nil
	})

	// Only the leader reconciles: it releases the first leak.
	gone1 := f.Pod("gone-1", corev1.PodRunning, "10.50.0.5")
	res1 := f.Reservation(pool.Name, "10.50.0.5", gone1, "node-a")
	f.DeletePod(gone1)
	poll.Eventually(t, 10*time.Second, "the leader releases the leak", f.Gone(res1))
	if l, fl := leader.Releases(t, gcpolicy.ReasonPodDeleted, false), follower.Releases(t, gcpolicy.ReasonPodDeleted, false); l != 1 || fl != 0 {
		t.Fatalf("releases: leader %v, follower %v; want 1 and 0", l, fl)
	}

	// The leader dies without giving the Lease up; the follower takes over once it expires.
	holder := leaseHolder(f, opts)
	leader.Stop(t)
	died := time.Now()
	poll.Eventually(t, 15*time.Second, "the follower takes over", func() error {
		if !elected(follower) {
			return errors.New("not elected yet")
		}
		return nil
	})
	t.Logf("took over %s after the leader died (lease duration %s)", time.Since(died).Round(time.Millisecond), opts.LeaseDuration)
	if h := leaseHolder(f, opts); h == holder {
		t.Errorf("the Lease is still held by %s", h)
	}
	gone2 := f.Pod("gone-2", corev1.PodRunning, "10.50.0.6")
	res2 := f.Reservation(pool.Name, "10.50.0.6", gone2, "node-a")
	f.DeletePod(gone2)
	poll.Eventually(t, 10*time.Second, "the new leader releases the next leak", f.Gone(res2))
	if got := follower.Releases(t, gcpolicy.ReasonPodDeleted, false); got != 1 {
		t.Errorf("the new leader's releases = %v, want 1", got)
	}
}

// elected reports whether m holds the leader Lease.
func elected(m *ctrltest.Manager) bool {
	select {
	case <-m.Mgr.Elected():
		return true
	default:
		return false
	}
}

// leaseHolder returns the holder of the leader election Lease.
func leaseHolder(f *ctrltest.Fixture, opts Options) string {
	t := f.T
	t.Helper()
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: opts.LeaderElectionNamespace, Name: opts.LeaderElectionID}
	if err := f.C.Get(context.Background(), key, lease); err != nil {
		t.Fatalf("reading the Lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return fmt.Sprint(*lease.Spec.HolderIdentity)
}
