// Package boltstore is netpool's embedded store: one bbolt file that does host-local's job,
// durably. Every Update is one fsynced bbolt read-write transaction; concurrent plugin processes
// serialise on a file lock whose wait is bounded.
//
// Layout (all keys of addresses are 16-byte network-order, so cursor order is numeric order):
//
//	pools/<pool>/alloc    address -> record of its holder
//	pools/<pool>/used     first address of an allocated run -> last address of that run
//	pools/<pool>/meta     "cursor" -> last address claimed (round-robin); "range" -> the range of
//	                      the last config that claimed, "created" -> its first claim (poolrange.go)
//	scopes/<scope>/used   allocated runs across every pool of one overlap scope
//	owners                pool \x00 containerID \x00 ifName -> address
//
// A pool that has released under a reuse cool-down also has blocked, cooling and cooled buckets
// (cooling.go); one with sticky pod names a persistent bucket, owner -> address (persistent.go).
//
// The "used" buckets hold maximal runs of allocated addresses, which is what makes the free
// search cost O(log n) in the number of allocations and nothing in the size of the range: the
// next free address after a is either a itself or one past the end of the run holding a.
package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/netpool/netpool/allocator"
)

var (
	bucketPools  = []byte("pools")
	bucketScopes = []byte("scopes")
	bucketOwners = []byte("owners")
	bucketAlloc  = []byte("alloc")
	bucketUsed   = []byte("used")
	bucketMeta   = []byte("meta")
	keyCursor    = []byte("cursor")
)

// Store is the bbolt-backed allocator.Store.
type Store struct {
	db   *bolt.DB
	lock *fileLock
	path string
	// broken is set when a call panicked inside bbolt: its locks and mapping can no longer be
	// trusted, so the store refuses further calls and Close does not wait on it for ever.
	broken bool
	// suspect is set when a call failed because of the file (ErrStoreUnusable): Close then does
	// not remember the state it leaves as sound.
	suspect bool
	// file is bbolt's descriptor of the database; opened is the state prepare checked or found
	// remembered (checked.go), which Close replaces with the state this process leaves.
	file   *os.File
	opened []byte
}

var _ allocator.Store = (*Store)(nil)

// Open opens (creating if needed) the store at path. It waits at most timeout for other
// processes to release the file and then fails with allocator.ErrStoreBusy.
func Open(path string, timeout time.Duration) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("%w: failed to create directory for %s: %w", allocator.ErrStoreUnusable, path, err)
	}
	return open(path, timeout, true)
}

// open opens the store at path; with create false it neither creates the file nor its buckets
// (OpenExisting).
func open(path string, timeout time.Duration, create bool) (*Store, error) {
	deadline := time.Now().Add(timeout)
	lock, err := acquireLock(path+".lock", deadline)
	if err != nil {
		return nil, err
	}
	checked, err := prepare(path, max(time.Until(deadline), time.Millisecond), create, lock)
	if err != nil {
		lock.release()
		return nil, err
	}
	// The sidecar lock is held, so bbolt's own flock is free at once; its timeout only guards
	// against a process that opens the file without the sidecar lock.
	var db *bolt.DB
	var file *os.File // bbolt's descriptor of the file, for the state Close remembers
	openFile := func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := openNoFollow(name, flag, perm)
		file = f
		return f, err
	}
	err = contain("open", path, func() error {
		var err error
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: max(time.Until(deadline), time.Millisecond), OpenFile: openFile})
		if err != nil {
			return err
		}
		if err := sameFile(file, checked); err != nil {
			_ = db.Close() // bbolt has read only the meta page of a file that was not checked
			return err
		}
		initialise := ensureBuckets
		if !create {
			initialise = checkBuckets
		}
		if err := initialise(db); err != nil {
			_ = db.Close() // the creation error is the one worth reporting
			if !create {
				return err
			}
			return fmt.Errorf("failed to initialise: %w", err)
		}
		return nil
	})
	if err != nil {
		// After a panic bbolt's descriptor and mapping are left to the exiting process: closing
		// them could fault again. The sidecar lock is netpool's own and always released.
		lock.release()
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("%w: %s is locked by another process: %w", allocator.ErrStoreBusy, path, err)
		}
		if errors.Is(err, allocator.ErrStoreUnusable) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: failed to open %s: %w", allocator.ErrStoreUnusable, path, err)
	}
	return &Store{db: db, lock: lock, path: path, file: file, opened: checked.key}, nil
}

// sameFile refuses a file bbolt opened that is not the one prepare checked (a rename over the path
// in between, by something that ignores the lock).
func sameFile(f *os.File, checked fileState) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Dev != checked.dev || st.Ino != checked.ino {
		return fmt.Errorf("%w: %s was replaced while it was being opened", allocator.ErrStoreUnusable, f.Name())
	}
	return nil
}

// ensureBuckets creates the top-level buckets on first use. It looks first in a read-only
// transaction, because a read-write one commits with two fsyncs even when it changes nothing, and
// the plugin opens the store once per invocation.
func ensureBuckets(db *bolt.DB) error {
	top := [][]byte{bucketPools, bucketScopes, bucketOwners}
	missing := false
	err := db.View(func(tx *bolt.Tx) error {
		for _, b := range top {
			missing = missing || tx.Bucket(b) == nil
		}
		return nil
	})
	if err != nil || !missing {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error {
		for _, b := range top {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
}

// Update runs fn in one read-write transaction, committed and fsynced when fn returns nil. Beyond
// the allocator.Store contract it is all or none: when fn fails, its releases are undone too.
func (s *Store) Update(ctx context.Context, fn func(context.Context, allocator.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.guard("update", func() error {
		return s.db.Update(func(tx *bolt.Tx) error { return fn(ctx, &txn{tx: tx}) })
	})
}

// View runs fn in one read-only transaction, a snapshot of every pool.
func (s *Store) View(ctx context.Context, fn func(context.Context, allocator.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.guard("read", func() error {
		return s.db.View(func(tx *bolt.Tx) error { return fn(ctx, &txn{tx: tx}) })
	})
}

// Close closes the database and releases the file lock. Before it lets go of the lock it
// remembers the state it leaves as sound (checked.go), so the next call need not walk the pages:
// it started from a sound state and only bbolt's commits changed it since.
func (s *Store) Close() error {
	defer s.lock.release()
	if !s.broken {
		if !s.suspect {
			s.rememberState()
		}
		return s.guard("close", s.db.Close)
	}
	// bbolt faulted on something the checks before it missed: the next call walks again.
	s.lock.forget()
	// After a contained panic bbolt may still hold its own locks: close in the background and
	// give up after closeWait rather than hang the call that is reporting the corruption.
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = contain("close", s.path, s.db.Close) // the panic that broke the store was reported
	}()
	select {
	case <-done:
	case <-time.After(closeWait):
	}
	return nil
}

// rememberState records the state of the file as this process leaves it: an fstat and the two meta
// pages' preads on bbolt's own descriptor, and a write of the lock file when the state changed.
func (s *Store) rememberState() {
	fi, err := s.file.Stat()
	if err != nil {
		return
	}
	m, err := currentMeta(s.file, fi.Size())
	if err != nil {
		s.lock.forget()
		return
	}
	if key := stateKey(fi, m); !bytes.Equal(key, s.opened) {
		s.lock.remember(key)
	}
}

// guard runs fn under contain and classifies its error. After a panic every further call fails at
// once, because bbolt's in-memory state may be half-changed.
func (s *Store) guard(what string, fn func() error) error {
	if s.broken {
		return fmt.Errorf("%w: %s failed earlier in this process and is not used again", allocator.ErrStoreUnusable, s.path)
	}
	err := classify(contain(what, s.path, fn))
	if faulted(err) {
		s.broken = true
	}
	if errors.Is(err, allocator.ErrStoreUnusable) {
		s.suspect = true
	}
	return err
}

// Check runs bbolt's consistency check; tests call it after every scenario.
func (s *Store) Check() error {
	return s.guard("check", func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			var errs []error
			for err := range tx.Check() {
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		})
	})
}
