package kubestore

import (
	"context"
	"fmt"
	"time"

	"github.com/netpool/netpool/allocator"
)

// sharedList is one live list of a pool that the node's concurrent calls share (share): thirty
// ADDs borrowing at once make one list, not thirty that a loaded API server answers ever slower.
type sharedList[T any] struct {
	started time.Time
	done    chan struct{}
	val     T // read-only once done
	err     error
}

// share returns what a list of the pool says, from a list that began after this call came to need
// it: one in flight or just made by another call of the node, or one of its own. So what the call
// sees is never older than the call, as if it had listed itself. *latest is the node's latest
// list of that kind for the pool, in flight or done, guarded by the pool's lock; apply, when not
// nil, runs under it with what a list of this call's own found; what names the list ("the
// addresses of pool p") for a timeout. The pool's lock is not held.
func share[T any](ctx context.Context, st *poolState, latest **sharedList[T], what string,
	list func(context.Context) (T, error), apply func(T)) (T, error) {
	var none T
	since := time.Now()
	for {
		if err := lockPool(ctx, st); err != nil {
			return none, err
		}
		l := *latest
		usable := l != nil && !l.started.Before(since)
		if l != nil && !usable && !isDone(l.done) {
			unlockPool(st) // a list older than this call is in flight: the next one is this call's
			if err := waitList(ctx, l.done, what); err != nil {
				return none, err
			}
			continue
		}
		if !usable || (isDone(l.done) && l.err != nil) {
			l = &sharedList[T]{started: time.Now(), done: make(chan struct{})}
			*latest = l
			unlockPool(st)
			val, err := list(ctx)
			st.lock <- struct{}{} // without a bound: the waiters must be told whatever happens
			l.val, l.err = val, err
			if err == nil && apply != nil {
				apply(val)
			}
			close(l.done)
			unlockPool(st)
			return val, err
		}
		unlockPool(st)
		if err := waitList(ctx, l.done, what); err != nil {
			return none, err
		}
		if l.err == nil {
			return l.val, nil
		}
		// That list failed, within its caller's bound: this call lists itself.
	}
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func waitList(ctx context.Context, done chan struct{}, what string) error {
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: timed out waiting for this node's list of %s: %w", allocator.ErrStoreBusy, what, ctx.Err())
	}
}
