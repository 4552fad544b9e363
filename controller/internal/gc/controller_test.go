package gc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/controller/internal/release"
	"github.com/netpool/netpool/internal/gcpolicy"
	"github.com/netpool/netpool/test/poll"
)

// The GC's user stories, on the real API server with the manager in-process. Pods are API objects
// whose status the tests write as a kubelet and Multus would. The reconcilers run on a testClock
// with an hour's grace: a reservation gets past the grace when the test advances the clock, so the
// order of each story is the test's, whatever the machine's speed.

func TestGCReleasesADeletedPodsReservationWithinSeconds(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	f.Node("node-a")
	pool := f.Pool("gc-deleted", "10.1.0.0/24", "")
	pod := f.Pod("web", corev1.PodRunning, "10.1.0.5")
	res := f.Reservation(pool.Name, "10.1.0.5", pod, "node-a")
	clock := &testClock{}
	opts := gcOptions(clock)
	clock.Advance(opts.GCGrace) // past the grace, only its live pod keeps the reservation
	m := startManager(t, opts)

	poll.Consistently(t, 2*time.Second, "a live pod's reservation must stay", f.Exists(res))
	f.DeletePod(pod)
	deleted := time.Now()
	poll.Eventually(t, 5*time.Second, "the deleted pod's reservation is released", f.Gone(res))
	t.Logf("released %s after the pod's deletion", time.Since(deleted).Round(time.Millisecond))

	// The releaser counts after its Delete returns, so the count may trail what the API server shows.
	poll.Eventually(t, 5*time.Second, "the release is counted once", func() error {
		if got := m.Releases(t, gcpolicy.ReasonPodDeleted, false); got != 1 {
			return fmt.Errorf("netpool_gc_releases_total{reason=%q} = %v, want 1", gcpolicy.ReasonPodDeleted, got)
		}
		return nil
	})
	poll.Eventually(t, 5*time.Second, "the release is an Event on the pool", func() error {
		return f.WantEvent(pool.UID, corev1.EventTypeWarning, release.EventAddressReleased, "10.1.0.5", "pod "+f.NS+"/web no longer exists")
	})
	if got := m.Releases(t, gcpolicy.ReasonPodDeleted, false); got != 1 {
		t.Errorf("netpool_gc_releases_total{reason=%q} = %v, want 1", gcpolicy.ReasonPodDeleted, got)
	}
}

func TestGCReleasesTheOldReservationOfARecreatedPodAndNeverTheNew(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	f.Node("node-a")
	pool := f.Pool("gc-replaced", "10.2.0.0/24", "")
	old := f.Pod("db-0", corev1.PodRunning, "10.2.0.5")
	oldRes := f.Reservation(pool.Name, "10.2.0.5", old, "node-a")
	clock := &testClock{}
	opts := gcOptions(clock)
	opts.SweepInterval = 200 * time.Millisecond
	m := startManager(t, opts)

	// A StatefulSet recreates db-0: same name, new UID, a new address whose ADD is under way
	// (the reservation exists, network-status does not list it yet), all within the grace.
	f.DeletePod(old)
	replacement := f.Pod("db-0", corev1.PodRunning, "10.2.0.5")
	newRes := f.Reservation(pool.Name, "10.2.0.6", replacement, "node-a")
	waitSweeps(t, m, 2, "within the grace both reservations stay", func() error {
		return errors.Join(f.Exists(oldRes)(), f.Exists(newRes)())
	})
	f.SetNetworkStatus(replacement, "10.2.0.6")
	clock.Advance(opts.GCGrace) // both are past the grace; every sweep judges them again

	poll.Eventually(t, 5*time.Second, "the old pod's reservation is released", f.Gone(oldRes))
	waitSweeps(t, m, 10, "the new pod's reservation must never be released", f.Exists(newRes))
	if got := m.Releases(t, gcpolicy.ReasonPodReplaced, false) + m.Releases(t, gcpolicy.ReasonPodDeleted, false); got != 1 {
		t.Errorf("releases = %v, want exactly 1 (the old reservation)", got)
	}
}

func TestGCNeverReleasesAReservationMadeMomentsBeforeItsNetworkStatus(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	f.Node("node-a")
	pool := f.Pool("gc-race", "10.3.0.0/24", "")
	clock := &testClock{}
	opts := gcOptions(clock)
	opts.SweepInterval = 200 * time.Millisecond
	m := startManager(t, opts)

	// Both pods run and Multus has reported another attachment only; then each gets an address,
	// and the GC judges both (every sweep) before Multus reports either: the grace protects them.
	racing := f.Pod("racing", corev1.PodRunning, "192.0.2.1")
	racingRes := f.Reservation(pool.Name, "10.3.0.5", racing, "node-a")
	leaked := f.Pod("leaked", corev1.PodRunning, "192.0.2.2")
	leakedRes := f.Reservation(pool.Name, "10.3.0.6", leaked, "node-a")
	waitSweeps(t, m, 2, "reservations younger than the grace stay", func() error {
		return errors.Join(f.Exists(racingRes)(), f.Exists(leakedRes)())
	})
	f.SetNetworkStatus(racing, "192.0.2.1", "10.3.0.5") // Multus reports the ADD that was under way
	clock.Advance(opts.GCGrace)

	// The control: the address that never reached network-status is released once past the grace,
	// so the check below would see a release.
	poll.Eventually(t, 5*time.Second, "the reservation missing from network-status is released", f.Gone(leakedRes))
	waitSweeps(t, m, 10, "a reservation whose address reached network-status must stay", f.Exists(racingRes))
	if got := m.Releases(t, gcpolicy.ReasonNotInNetworkStatus, false); got != 1 {
		t.Errorf("netpool_gc_releases_total{reason=%q} = %v, want 1", gcpolicy.ReasonNotInNetworkStatus, got)
	}
	poll.Eventually(t, 5*time.Second, "the release is an Event on the pod", func() error {
		return f.WantEvent(leaked.UID, corev1.EventTypeWarning, release.EventAddressReleased, "10.3.0.6", "does not list 10.3.0.6")
	})
}

func TestGCSweepReleasesWhatWasDeletedWhileTheControllerWasDown(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	f.Node("node-a")
	pool := f.Pool("gc-restart", "10.4.0.0/24", "")
	var pods []*corev1.Pod
	var reservations []string
	for i := range 6 {
		addr := fmt.Sprintf("10.4.0.%d", 10+i)
		p := f.Pod(fmt.Sprintf("p%d", i), corev1.PodRunning, addr)
		pods = append(pods, p)
		reservations = append(reservations, f.Reservation(pool.Name, addr, p, "node-a").Name)
	}
	clock := &testClock{}
	opts := gcOptions(clock)
	first := startManager(t, opts)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if !first.Mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the first controller's cache did not sync")
	}
	first.Stop(t)
	clock.Advance(opts.GCGrace) // the reservations are past the grace by the time the controller is back

	// While no controller runs, half the pods go; one finishes instead.
	f.DeletePod(pods[0])
	f.DeletePod(pods[1])
	f.SetPhase(pods[2], corev1.PodSucceeded)
	second := startManager(t, opts)

	for i, name := range reservations {
		res := ctrltest.NewReservation(pool.Name, fmt.Sprintf("10.4.0.%d", 10+i), pods[i], "node-a")
		if res.Name != name {
			t.Fatalf("reservation name %s, want %s", res.Name, name)
		}
		if i < 3 {
			poll.Eventually(t, 5*time.Second, "the sweep at start releases "+name, f.Gone(res))
		} else {
			poll.Consistently(t, 300*time.Millisecond, "a live pod's reservation stays", f.Exists(res))
		}
	}
	if got := second.Releases(t, gcpolicy.ReasonPodDeleted, false); got != 2 {
		t.Errorf("PodDeleted releases = %v, want 2", got)
	}
	if got := second.Releases(t, gcpolicy.ReasonPodFinished, false); got != 1 {
		t.Errorf("PodFinished releases = %v, want 1", got)
	}
}

func TestGCDryRunReportsWithoutReleasing(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	f.Node("node-a")
	pool := f.Pool("gc-dry", "10.5.0.0/24", "")
	pod := f.Pod("gone", corev1.PodRunning, "10.5.0.5")
	res := f.Reservation(pool.Name, "10.5.0.5", pod, "node-a")
	f.DeletePod(pod)
	clock := &testClock{}
	opts := gcOptions(clock)
	opts.DryRun = true
	clock.Advance(opts.GCGrace)
	m := startManager(t, opts)

	poll.Eventually(t, 5*time.Second, "the dry run reports the leak on the pool", func() error {
		return f.WantEvent(pool.UID, corev1.EventTypeWarning, release.EventLeakFound, "Dry run: would release 10.5.0.5", "no longer exists")
	})
	poll.Consistently(t, 2*time.Second, "a dry run releases nothing", f.Exists(res))
	if got := m.Releases(t, gcpolicy.ReasonPodDeleted, true); got != 1 {
		t.Errorf("netpool_gc_releases_total{reason=%q,dry_run=\"true\"} = %v, want 1", gcpolicy.ReasonPodDeleted, got)
	}
}

func TestGCNeverReleasesAReservationWithoutAPod(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	f.Node("node-a")
	pool := f.Pool("gc-nopod", "10.6.0.0/24", "")
	res := f.Reservation(pool.Name, "10.6.0.5", nil, "node-a")
	opts := ctrltest.TestOptions()
	opts.SweepInterval = 200 * time.Millisecond
	m := startManager(t, opts)

	poll.Eventually(t, 5*time.Second, "a sweep runs", func() error {
		if n := m.Metric(t, "netpool_gc_sweeps_total", nil); n < 2 {
			return fmt.Errorf("%v sweeps", n)
		}
		return nil
	})
	poll.Consistently(t, 1500*time.Millisecond, "a reservation without pod identity stays", f.Exists(res))
}
