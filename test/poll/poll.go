// Package poll is the one way netpool's tests wait for something to become true: Eventually,
// Consistently, and Until for code that has a context but no test.
//
//	poll.Eventually(t, 5*time.Second, "the reservation is released", func() error { ... })
//
// A check returns nil once what it waits for holds, and otherwise an error saying what it saw, so a
// timeout reports the last state rather than only that time ran out.
package poll

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Interval is how long a poll waits between two checks: short enough that a test waits little
// past the moment its condition holds, long enough that an API server under load is not flooded.
const Interval = 50 * time.Millisecond

// Eventually calls check every Interval until it returns nil, and fails t with check's last error
// when that does not happen within timeout. It returns at once when the first check passes.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := Until(ctx, Interval, func(context.Context) error { return check() }); err != nil {
		t.Fatalf("%s: not within %s: %v", what, timeout, err)
	}
}

// Consistently calls check every Interval for d and fails t as soon as it returns an error.
func Consistently(t testing.TB, d time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if err := check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !time.Now().Before(deadline) {
			return
		}
		time.Sleep(Interval)
	}
}

// Until calls check every interval until it returns nil, or until ctx ends; then it returns ctx's
// error with check's last error. check gets ctx, so one that makes requests stops with it.
func Until(ctx context.Context, interval time.Duration, check func(context.Context) error) error {
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}
