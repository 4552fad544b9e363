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

func (s *Store) isPending(p pendingClaim) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pending[p]
	return ok
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
//
// The index is made to agree with what the read found, whatever it held under the name: a pending
// claim may be a reservation the index knows (a rollback or a DEL whose Delete got no answer, or
// one the informer reported) that is gone by now, and the informer, cut off by the same outage, may
// not have said so yet. Answering from such an entry would tell the runtime the attachment holds
// an address no reservation holds, which the next ADD anywhere may be given.
func (s *Store) settleOwner(ctx context.Context, pool string, owner allocator.Owner) error {
	for _, p := range s.pendingOf(pool, &owner) {
		before, known := s.index.lookup(p.name)
		r := &ipamv1.OverlappingRangeIPReservation{}
		err := s.retry(ctx, "read reservation "+p.name, func(ctx context.Context) error {
			return s.live.Get(ctx, client.ObjectKey{Name: p.name}, r)
		})
		switch {
		case err != nil && !apierrors.IsNotFound(err):
			return fmt.Errorf("an earlier claim of %s/%s (reservation %s) has an unknown outcome: %w",
				owner.ContainerID, owner.IfName, p.name, apiFailure("read reservation "+p.name, err))
		case err == nil && s.ownedBy(r, pool, owner):
			s.index.put(r)
		default:
			s.forgetStale(p.name, before, known, r, err == nil)
		}
		s.dropPending(p)
	}
	return nil
}

// forgetStale removes the index's entry before under name, as it was before a live read of the
// name, unless the read found that very object (live, when found). Only that entry goes: another
// call of the node may have claimed the name since the read (the pending claim's Create never
// landed, and the address was free), and its entry is the truth. The removed UID is tombstoned, so
// a late event of the informer cannot bring it back.
func (s *Store) forgetStale(name string, before entry, known bool, live *ipamv1.OverlappingRangeIPReservation, found bool) {
	if known && (!found || before.uid != live.UID) {
		s.index.remove(name, before.uid, true)
	}
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

// resolvePending makes one pass over the pending claims.
func (s *Store) resolvePending(ctx context.Context) {
	s.resolveClaims(ctx, s.pendingClaims())
}

// pendingClaims returns the pending claims as they are now.
func (s *Store) pendingClaims() []pendingClaim {
	s.mu.Lock()
	defer s.mu.Unlock()
	claims := make([]pendingClaim, 0, len(s.pending))
	for p := range s.pending {
		claims = append(claims, p)
	}
	return claims
}

// resolveClaims resolves claims, taken from the pending set earlier. A claim whose attachment is in
// a call right now is skipped: that call settles it itself. A claim is resolved only if it is still
// pending once its owner's lock is held: since claims were taken, a call of that attachment may
// have settled it, adopting the reservation and answering the runtime with its address, and
// deleting the reservation then would leave the pod with an address nobody holds (the restart test
// met it: a pass over many claims is slow while the API server warms up).
func (s *Store) resolveClaims(ctx context.Context, claims []pendingClaim) {
	for _, p := range claims {
		if !s.tryLockOwner(p.owner) {
			continue
		}
		if s.isPending(p) {
			if err := s.resolveOne(ctx, p); err != nil {
				s.log.Debug("Pending reservation still unresolved", "reservation", p.name, "err", err)
			}
		}
		s.unlockOwner(p.owner)
	}
}

// resolveOne deletes the pending claim p if it exists and is still ours. The owner's lock is held.
func (s *Store) resolveOne(ctx context.Context, p pendingClaim) error {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	before, known := s.index.lookup(p.name)
	r := &ipamv1.OverlappingRangeIPReservation{}
	err := s.live.Get(ctx, client.ObjectKey{Name: p.name}, r)
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return err
	case err != nil || !s.ownedBy(r, p.pool, p.owner):
		s.forgetStale(p.name, before, known, r, err == nil)
	case r.Spec.Owner != nil:
		// A persistent owner's address stays its owner's: only the attachment leaves it.
		if err := s.removeUser(ctx, r.Name, r.UID, p.owner); err != nil {
			return err
		}
		s.log.Info("Unbound a persistently owned reservation left by a failed call", "reservation", p.name,
			"containerID", p.owner.ContainerID, "ifName", p.owner.IfName)
	default:
		if err := s.deleteReservation(ctx, r.Name, r.UID); err != nil {
			return err
		}
		if st := s.poolStateFor(p.pool); st != nil {
			if a, ok := addrOf(r); ok {
				s.releasedUnlocked(ctx, st, a)
			}
		}
		s.log.Info("Deleted a reservation left by a failed call", "reservation", p.name,
			"containerID", p.owner.ContainerID, "ifName", p.owner.IfName)
	}
	s.dropPending(p)
	return nil
}
