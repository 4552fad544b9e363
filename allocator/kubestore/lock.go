package kubestore

import (
	"context"
	"fmt"

	"github.com/netpool/netpool/allocator"
)

// lockPool takes the node-local lock of pool st, waiting at most until ctx ends.
func lockPool(ctx context.Context, st *poolState) error {
	// A free lock is taken even by a call whose bound has passed, so that the error such a call
	// meets next names what spent its time, not a lock nobody held.
	select {
	case st.lock <- struct{}{}:
		return nil
	default:
	}
	select {
	case st.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: timed out waiting for the node-local lock of pool %s: %w", allocator.ErrStoreBusy, st.name, ctx.Err())
	}
}

func unlockPool(st *poolState) { <-st.lock }

// ownerLock serialises the calls of one attachment.
type ownerLock struct {
	ch   chan struct{}
	refs int // callers holding or waiting; the entry goes when it reaches 0
}

// lockOwner takes the lock of owner, waiting at most until ctx ends.
func (s *Store) lockOwner(ctx context.Context, owner allocator.Owner) error {
	l := s.refOwner(owner)
	select {
	case l.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		s.putOwner(owner, l)
		return fmt.Errorf("%w: timed out waiting for another call of %s/%s: %w", allocator.ErrStoreBusy, owner.ContainerID, owner.IfName, ctx.Err())
	}
}

// tryLockOwner takes the lock of owner if it is free.
func (s *Store) tryLockOwner(owner allocator.Owner) bool {
	l := s.refOwner(owner)
	select {
	case l.ch <- struct{}{}:
		return true
	default:
		s.putOwner(owner, l)
		return false
	}
}

// refOwner returns the lock of owner, made on first use, counting the caller among its users; the
// caller gives it back with putOwner unless it takes the lock.
func (s *Store) refOwner(owner allocator.Owner) *ownerLock {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.owners[owner]
	if l == nil {
		l = &ownerLock{ch: make(chan struct{}, 1)}
		s.owners[owner] = l
	}
	l.refs++
	return l
}

// unlockOwner releases the lock of owner.
func (s *Store) unlockOwner(owner allocator.Owner) {
	s.mu.Lock()
	l := s.owners[owner]
	s.mu.Unlock()
	<-l.ch
	s.putOwner(owner, l)
}

func (s *Store) putOwner(owner allocator.Owner, l *ownerLock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.refs--; l.refs == 0 {
		delete(s.owners, owner)
	}
}
