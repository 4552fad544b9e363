package kubestore

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// addPending records a reservation whose Create may have taken effect without an answer. Several
// attachments may have tried the same name in turn during an outage; each claim is kept.
func (s *Store) addPending(p pendingClaim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[p] = struct{}{}
}

func (s *Store) dropPending(p pendingClaim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, p)
}

// pendingOf returns the pending claims of owner in pool, or of every owner when owner is nil.
func (s *Store) pendingOf(pool string, owner *allocator.Owner) []pendingClaim {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []pendingClaim
	for p := range s.pending {
		if p.pool == pool && (owner == nil || p.owner == *owner) {
			out = append(out, p)
		}
	}
	return out
}

// settleOwner resolves the pending claims of owner in pool before the index is asked what owner
// holds. A claim that exists is adopted: the attachment is being added (or deleted) again, and
// that call now holds it. Until the API server answers, the call fails with ErrStoreBusy, because
// answering "holds nothing" could give the attachment a second address. The owner's lock is held.
func (s *Store) settleOwner(ctx context.Context, pool string, owner allocator.Owner) error {
	for _, p := range s.pendingOf(pool, &owner) {
		r := &ipamv1.OverlappingRangeIPReservation{}
		err := s.retry(ctx, "read reservation "+p.name, func(ctx context.Context) error {
			return s.live.Get(ctx, client.ObjectKey{Name: p.name}, r)
		})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("an earlier claim of %s/%s (reservation %s) has an unknown outcome: %w",
				owner.ContainerID, owner.IfName, p.name, apiFailure("read reservation "+p.name, err))
		case s.ownedBy(r, pool, owner):
			s.index.put(r)
		}
		s.dropPending(p)
	}
	return nil
}

// resolveLoop deletes pending claims in the background once the API server answers, so a Create
// left without an answer during an outage does not hold an address that no attachment was given.
func (s *Store) resolveLoop(ctx context.Context) {
	t := time.NewTicker(s.opts.ResolveInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.resolvePending(ctx)
		}
	}
}

// resolvePending makes one pass over the pending claims. A claim whose attachment is in a call
// right now is skipped: that call settles it itself.
func (s *Store) resolvePending(ctx context.Context) {
	s.mu.Lock()
	var claims []pendingClaim
	for p := range s.pending {
		claims = append(claims, p)
	}
	s.mu.Unlock()
	for _, p := range claims {
		if !s.tryLockOwner(p.owner) {
			continue
		}
		if err := s.resolveOne(ctx, p); err != nil {
			s.log.Debug("Pending reservation still unresolved", "reservation", p.name, "err", err)
		}
		s.unlockOwner(p.owner)
	}
}

// resolveOne deletes the pending claim p if it exists and is still ours. The owner's lock is held.
func (s *Store) resolveOne(ctx context.Context, p pendingClaim) error {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	r := &ipamv1.OverlappingRangeIPReservation{}
	err := s.live.Get(ctx, client.ObjectKey{Name: p.name}, r)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	case s.ownedBy(r, p.pool, p.owner) && r.Spec.Owner != nil:
		// A persistent owner's address stays its owner's: only the attachment leaves it.
		if err := s.removeUser(ctx, r.Name, r.UID, p.owner); err != nil {
			return err
		}
		s.log.Info("Unbound a persistently owned reservation left by a failed call", "reservation", p.name,
			"containerID", p.owner.ContainerID, "ifName", p.owner.IfName)
	case s.ownedBy(r, p.pool, p.owner):
		if err := s.deleteReservation(ctx, r.Name, r.UID); err != nil {
			return err
		}
		if st := s.poolStateFor(p.pool); st != nil {
			if a, ok := addrOf(r); ok && lockPool(ctx, st) == nil {
				s.released(ctx, st, a)
				unlockPool(st)
			}
		}
		s.log.Info("Deleted a reservation left by a failed call", "reservation", p.name,
			"containerID", p.owner.ContainerID, "ifName", p.owner.IfName)
	}
	s.dropPending(p)
	return nil
}
