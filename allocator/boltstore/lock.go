package boltstore

import (
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
	wait := 200 * time.Microsecond
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return &fileLock{f: f}, nil
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			_ = f.Close() // the flock error is the one worth reporting
			return nil, fmt.Errorf("%w: failed to lock %s: %w", allocator.ErrStoreUnusable, path, err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			_ = f.Close()
			return nil, fmt.Errorf("%w: %s is held by another process", allocator.ErrStoreBusy, path)
		}
		time.Sleep(min(wait, left))
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
