package boltstore

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/ipam"
)

// closeWait bounds Close after a contained panic: bbolt's locks may still be held by the
// transaction that panicked, and the plugin must exit rather than wait for them.
const closeWait = time.Second

// contain runs fn, which reads the mapped database, and turns a panic or a memory fault (SIGSEGV,
// SIGBUS) into a *faultError. bbolt trusts the file: a corrupt page makes it panic ("invalid
// freelist page") or read unmapped memory. Faults panic instead of killing the process only on a
// goroutine that asked for it (debug.SetPanicOnFault), so contain asks for the duration of fn.
func contain(what, path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = &faultError{what: what, path: path, panic: p}
		}
	}()
	return fn()
}

// faultError is a panic or memory fault inside bbolt: the store is unusable, and bbolt's
// in-memory state (its locks, its mapping) can no longer be trusted.
type faultError struct {
	what, path string
	panic      any
}

func (e *faultError) Error() string {
	return fmt.Sprintf("%v: failed to %s %s, which is probably corrupt: %v", allocator.ErrStoreUnusable, e.what, e.path, e.panic)
}

func (e *faultError) Unwrap() error { return allocator.ErrStoreUnusable }

func faulted(err error) bool {
	var fe *faultError
	return errors.As(err, &fe)
}

// classify gives an error from bbolt its meaning for the allocator. The allocator's own errors,
// config errors and the call's context pass unchanged; anything else came from the file (a commit
// that hit a full disk, an I/O error, a bucket bbolt cannot read) and makes the store unusable.
func classify(err error) error {
	if err == nil {
		return nil
	}
	for _, known := range []error{
		allocator.ErrPoolExhausted, allocator.ErrAddressInUse, allocator.ErrAddressNotAllowed,
		allocator.ErrAttachmentConflict, allocator.ErrCheckFailed, allocator.ErrStoreBusy,
		allocator.ErrStoreUnusable, ipam.ErrInvalidConfig, context.Canceled, context.DeadlineExceeded,
	} {
		if errors.Is(err, known) {
			return err
		}
	}
	return fmt.Errorf("%w: %w", allocator.ErrStoreUnusable, err)
}
