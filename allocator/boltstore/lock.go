package boltstore

import (
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netpool/netpool/allocator"
)

// fileLock is an exclusive flock on a sidecar file. bbolt's own flock wait polls every 50 ms,
// which caps a node at ~20 attachments per second under contention; this lock polls from 200 µs
// upward, so waiters follow each other within a fraction of a millisecond. The kernel drops the
// lock when its holder dies, so a kill -9 never leaves the store locked.
type fileLock struct{ f *os.File }

func acquireLock(path string, deadline time.Time) (*fileLock, error) {
	// O_NOFOLLOW: a link planted at the lock's path must not make netpool create files elsewhere.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: failed to open lock file %s: %w", allocator.ErrStoreUnusable, path, err)
	}
	if err := waitFlock(context.Background(), f, unix.LOCK_EX, deadline); err != nil {
		_ = f.Close() // the flock error is the one worth reporting
		return nil, err
	}
	return &fileLock{f: f}, nil
}

// waitFlock takes the flock how (LOCK_EX or LOCK_SH) on f, polling from 200 µs up to 10 ms, until
// deadline (ErrStoreBusy) or the end of ctx.
func waitFlock(ctx context.Context, f *os.File, how int, deadline time.Time) error {
	wait := 200 * time.Microsecond
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			return fmt.Errorf("%w: failed to lock %s: %w", allocator.ErrStoreUnusable, f.Name(), err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w: %s is held by another process", allocator.ErrStoreBusy, f.Name())
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(wait*2, 10*time.Millisecond)
	}
}

// release drops the lock. Closing the descriptor releases the flock; there is nothing useful to do
// with a close error on a lock file.
func (l *fileLock) release() {
	if l != nil && l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}
