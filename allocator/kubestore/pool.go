package kubestore

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/ippool"
	"github.com/netpool/netpool/ipam"
)

// poolState is what this node knows of one pool. Everything below lock is read and written only
// with lock held (the node-local lock: one choice of the node per pool at a time). No API call is
// made with the lock held, so waiting for it costs the memory work of the calls ahead, never their
// requests: on a loaded node a queue of ADDs behind one slow request would otherwise time out.
type poolState struct {
	name string
	geo  geometry
	lock chan struct{}
	// pool is the IPPool as first read; its range and sliceSize cannot change.
	pool *ipamv1.IPPool
	// seen is set once the cache has shown this pool (this UID): from then on, the pool missing
	// from the cache means it was deleted, not that the cache has yet to see it.
	seen atomic.Bool

	// loaded is set once the node's slices of the pool have been read from the cache.
	loaded bool
	// slices are the node's blocks of the pool, in index order.
	slices []ownSlice
	// cursor is the last address this node claimed in the pool (round-robin); resumed is set once
	// the first choice has placed it (resumeCursor).
	cursor  netip.Addr
	resumed bool
	// foreign are reservation names found held by others (AlreadyExists) inside the node's blocks.
	foreign map[string]bool
	// full marks blocks found without a free address, with the part of the block that was scanned;
	// a release in the block clears it.
	full map[uint64]ipam.Interval
	// inflight are the candidates being created right now, by reservation name, so that the
	// node's concurrent ADDs choose different addresses.
	inflight map[string]netip.Addr
	// claiming is the node's claim of a new block in flight, nil when none (slices.go).
	claiming *blockClaim
	// The node's latest lists of the pool, each in flight or done, which its concurrent calls
	// share (share): of the pool's scope (borrowing), of the blocks its slices hold (listBlocks),
	// and of other nodes' slices with their cooling addresses (coolingElsewhere). Each is read
	// only while it is no older than the call that reads it.
	scopeList   *sharedList[scopeView]
	blocksList  *sharedList[map[uint64]bool]
	coolingList *sharedList[[]ipamv1.IPPoolSlice]
	// cooling are the addresses this node released under the pool's reuse cool-down (cooling.go).
	cooling coolingSet
	// hints are what the node knows of other nodes' blocks and where its next claim looks (blocks.go).
	hints blockHints
}

// ownSlice is one block the node owns.
type ownSlice struct {
	index  uint64
	name   string
	prefix netip.Prefix
}

// poolStateFor returns the state of a pool already bound by resolvePoolRef.
func (s *Store) poolStateFor(name string) *poolState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pools[name]
}

// ensureInlinePool returns the pool of range r of an inline (whereabouts-style) config, creating
// the IPPool the pool model derives from it (ippool.Derive) on first use. An existing pool of that
// name must have the same range and network name. A pool that would refuse the call anyway (see
// poolRules) is not created, so a refused config changes no state.
func (s *Store) ensureInlinePool(ctx context.Context, c *ipam.Config, r ipam.Range) (*poolState, error) {
	want, err := ippool.Derive(c.NetworkName, r, ippool.RulesOf(c))
	if err != nil {
		return nil, &ipam.ConfigError{Field: "range", Value: r.Subnet.String(), Reason: err.Error()}
	}
	name := want.Name
	known := s.poolStateFor(name)
	pool := &ipamv1.IPPool{}
	err = s.retry(ctx, "read IPPool "+name, func(ctx context.Context) error {
		return s.client.Get(ctx, client.ObjectKey{Name: name}, pool)
	})
	switch {
	case known == nil:
	case err == nil && pool.UID == known.pool.UID:
		known.seen.Store(true)
		return known, nil // checked when it was first read; Bind applies the pool's rules
	case apierrors.IsNotFound(err) && !known.seen.Load():
		// Created by this agent a moment ago and not in the cache yet, or deleted before the
		// cache ever showed it: the API server tells. If it cannot answer, what the agent knows
		// is the pool.
		live := &ipamv1.IPPool{}
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		lerr := s.live.Get(actx, client.ObjectKey{Name: name}, live)
		cancel()
		if !apierrors.IsNotFound(lerr) && (lerr != nil || live.UID == known.pool.UID) {
			return known, nil
		}
	case err != nil && !apierrors.IsNotFound(err):
		return known, nil // the cache cannot answer; what the agent knows will do
	}
	// Unknown, or gone from the cache after it was there: the controller removes derived pools
	// that nothing uses, and the next call derives the pool again.
	if apierrors.IsNotFound(err) {
		if err := s.poolRules(ctx, want, c); err != nil {
			return nil, err
		}
		pool, err = s.createInlinePool(ctx, want)
	}
	if err != nil {
		return nil, apiFailure("use IPPool "+name, err)
	}
	if err := ippool.CheckDerivedFor(pool, c.NetworkName, r); err != nil {
		return nil, &ipam.ConfigError{Field: "range", Value: r.Subnet.String(), Reason: err.Error()}
	}
	if known != nil && pool.UID == known.pool.UID {
		return known, nil
	}
	g, err := newGeometry(r.Subnet, pool.Spec.SliceSize)
	if err != nil {
		return nil, &ipam.ConfigError{Field: "IPPool " + name, Value: pool.Spec.Range, Reason: err.Error()}
	}
	if known != nil {
		s.forgetPoolState(name) // another incarnation of the pool: its slices and cursor are not ours
	}
	return s.poolState(pool, g), nil
}

// poolCreation is one node's creation of an inline pool in flight, which the node's concurrent
// first uses of the pool share: a burst of ADDs on a new network makes one Create, not one each
// (and as many reads back of the pool one of them made) that a loaded API server answers ever
// slower.
type poolCreation struct {
	done chan struct{}
	pool *ipamv1.IPPool
	err  error
}

// createInlinePool creates the derived pool want, or reads it back when it exists (another node
// created it first, or an earlier attempt of ours did). A creation of the same pool by another
// call of the node is joined; should it fail (its own bound may have run out first), the call
// tries itself.
func (s *Store) createInlinePool(ctx context.Context, want *ipamv1.IPPool) (*ipamv1.IPPool, error) {
	for {
		s.mu.Lock()
		f := s.creating[want.Name]
		if f == nil {
			f = &poolCreation{done: make(chan struct{})}
			s.creating[want.Name] = f
			s.mu.Unlock()
			f.pool, f.err = s.createPool(ctx, want)
			s.mu.Lock()
			delete(s.creating, want.Name)
			s.mu.Unlock()
			close(f.done)
			return f.pool, f.err
		}
		s.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: timed out waiting for this node's creation of IPPool %s: %w",
				allocator.ErrStoreBusy, want.Name, ctx.Err())
		}
		if f.err == nil {
			return f.pool.DeepCopy(), nil
		}
		if !errors.Is(f.err, allocator.ErrStoreBusy) && !transient(f.err) {
			return nil, f.err // a definite answer holds for this call too
		}
	}
}

// createPool makes one attempt series at creating want, reading it back when it exists.
func (s *Store) createPool(ctx context.Context, want *ipamv1.IPPool) (*ipamv1.IPPool, error) {
	name := want.Name
	pool := &ipamv1.IPPool{}
	err := s.retry(ctx, "create IPPool "+name, func(ctx context.Context) error {
		made := want.DeepCopy() // each attempt sends the pool as derived
		if err := s.client.Create(ctx, made); err != nil {
			return err
		}
		pool = made // with the UID the API server gave it
		return nil
	})
	if apierrors.IsAlreadyExists(err) {
		err = s.retry(ctx, "read IPPool "+name, func(ctx context.Context) error {
			return s.live.Get(ctx, client.ObjectKey{Name: name}, pool)
		})
	}
	return pool, err
}

// forgetPoolState drops what the node knew of a pool that was deleted, so that the pool of that
// name made next starts afresh. Calls still holding the old state finish with it.
func (s *Store) forgetPoolState(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pools, name)
}

// resolvePoolRef reads the operator-made pool c references and returns a copy of c with its
// Ranges (and an empty network_name) filled from the pool; c itself is left as it is.
func (s *Store) resolvePoolRef(ctx context.Context, c *ipam.Config) (*ipam.Config, error) {
	pool := &ipamv1.IPPool{}
	err := s.retry(ctx, "read IPPool "+c.Pool, func(ctx context.Context) error {
		err := s.client.Get(ctx, client.ObjectKey{Name: c.Pool}, pool)
		if apierrors.IsNotFound(err) {
			// The cache may not have seen a pool created a moment ago.
			err = s.live.Get(ctx, client.ObjectKey{Name: c.Pool}, pool)
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, &ipam.ConfigError{Field: "pool", Value: c.Pool, Reason: "no IPPool of that name"}
	}
	if err != nil {
		return nil, apiFailure("read IPPool "+c.Pool, err)
	}
	if err := ippool.CheckReference(pool, c.NetworkName); err != nil {
		return nil, &ipam.ConfigError{Field: "pool", Value: c.Pool, Reason: err.Error()}
	}
	parsed, err := ippool.Parse(pool)
	if err != nil {
		return nil, &ipam.ConfigError{Field: "IPPool " + c.Pool, Reason: err.Error()}
	}
	r := parsed.Range
	for _, a := range c.Requested {
		if !r.Subnet.Contains(a) {
			return nil, &ipam.ConfigError{Field: "requested IP", Value: a.String(),
				Reason: fmt.Sprintf("is not inside IPPool %s (%s)", c.Pool, r.Subnet)}
		}
	}
	if len(c.Requested) > 1 {
		return nil, &ipam.ConfigError{Field: "requested IP", Value: c.Requested[1].String(),
			Reason: fmt.Sprintf("and %s are both in IPPool %s; one address per range is handed out", c.Requested[0], c.Pool)}
	}
	g, err := newGeometry(r.Subnet, pool.Spec.SliceSize)
	if err != nil {
		return nil, &ipam.ConfigError{Field: "IPPool " + c.Pool, Value: pool.Spec.Range, Reason: err.Error()}
	}
	resolved := *c
	resolved.NetworkName = pool.Spec.NetworkName
	resolved.Ranges = []ipam.Range{r}
	s.poolState(pool, g)
	return &resolved, nil
}

// capacityText is the number of addresses a range can hand out, for messages.
func capacityText(r ipam.Range) string {
	if c := r.Capacity(); c.Cmp(big.NewInt(0)) >= 0 {
		return c.String()
	}
	return "0"
}
