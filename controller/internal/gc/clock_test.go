package gc

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/test/poll"
)

// testClock is the reconcilers' clock (Options.Now) in tests that age objects: real time plus an
// offset that only the test moves. Intervals and requeues still pass in real time, but an object
// gets past a grace period when the test says so, not after a sleep.
type testClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// Advance moves the clock forward by d: every object that exists now is at least d old.
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// gcOptions are ctrltest.TestOptions on clock with a grace period no test outlives: a reservation is past
// it only once the test advances clock by opts.GCGrace.
func gcOptions(clock *testClock) ctrltest.Options {
	o := ctrltest.TestOptions()
	o.GCGrace = time.Hour
	o.Now = clock.Now
	return o
}

// waitSweeps waits until the manager has swept every reservation n more times than it had when
// called, checking check (when not nil) at every poll, and fails the test if check fails or the
// sweeps do not come within a minute.
func waitSweeps(t *testing.T, m *ctrltest.Manager, n int, what string, check func() error) {
	t.Helper()
	target := m.Metric(t, "netpool_gc_sweeps_total", nil) + float64(n)
	poll.Eventually(t, time.Minute, what, func() error {
		if check != nil {
			if err := check(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		if got := m.Metric(t, "netpool_gc_sweeps_total", nil); got < target {
			return fmt.Errorf("%v sweeps, waiting for %v", got, target)
		}
		return nil
	})
}

func TestClockAdvances(t *testing.T) {
	c := &testClock{}
	before := time.Now()
	c.Advance(time.Hour)
	if got := c.Now().Sub(before); got < time.Hour || got > time.Hour+time.Minute {
		t.Errorf("an hour after Advance(1h) the clock is %v ahead", got)
	}
}
