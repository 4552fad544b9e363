package kubestore

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/reservation"
)

// rollbackTimeout bounds the deletes that undo a failed Update. What cannot be deleted in time is
// left pending and deleted in the background.
const rollbackTimeout = 5 * time.Second

// maxProbes bounds how many candidates HasFree reads back before it lists the pool instead.
const maxProbes = 8

// errReadOnly is returned when a View tries to change state.
var errReadOnly = errors.New("kubestore: claim or release in a read-only transaction")

// txn is one Update or View. Its context is the one each method is given, bounded by run.
type txn struct {
	b        *callStore
	writable bool
	// owner is the attachment whose lock the txn holds, when locked is set.
	owner  allocator.Owner
	locked bool
	// created are the reservations this txn made, in order; rollback undoes them.
	created []claimRef
}

// claimRef names one reservation this store created.
type claimRef struct {
	name  string
	uid   types.UID
	pool  string
	owner allocator.Owner
	// persistent is set for a reservation made for a persistent owner: undoing it unbinds owner
	// (removeUser) and leaves the address with the persistent owner, whose end releases it.
	persistent bool
}

// outcome is what one Create of a candidate came to.
type outcome int

const (
	created outcome = iota // the reservation is ours (made now or by a lost earlier attempt)
	taken                  // another attachment holds the address
	failed                 // the API server failed us; see the error
)

var _ allocator.Txn = (*txn)(nil)

func (t *txn) use(key string) (*poolUse, error) {
	u := t.b.pools[key]
	if u == nil {
		return nil, fmt.Errorf("%w: pool %s is not part of this call's config", allocator.ErrStoreUnusable, key)
	}
	return u, nil
}

// usePool is use for the verbs given a whole allocator.Pool. The store keeps its own scope,
// derived at Bind from the same config, because reservation names are API; a Pool whose overlap
// scope says otherwise comes from another config and is refused rather than silently reread.
func (t *txn) usePool(p allocator.Pool) (*poolUse, error) {
	u, err := t.use(p.Key)
	if err != nil {
		return nil, err
	}
	if want := scopeOf(u); p.Scope != want {
		return nil, fmt.Errorf("%w: pool %s was bound with overlap scope %q, not %q", allocator.ErrStoreUnusable, p.Key, want, p.Scope)
	}
	return u, nil
}

// beginClaim is the start of the verbs that take an address: the txn must be writable, the pool
// must admit the pod's namespace, and the txn holds the claimer's lock. Only the claiming verbs
// answer to the pool's namespaceSelector, so that DEL, CHECK and GC work whatever CNI_ARGS
// carries: a runtime that sends DEL without K8S_POD_NAMESPACE must not leak the address.
func (t *txn) beginClaim(ctx context.Context, p allocator.Pool, owner allocator.Owner) (*poolUse, error) {
	if !t.writable {
		return nil, errReadOnly
	}
	u, err := t.usePool(p)
	if err != nil {
		return nil, err
	}
	if u.admit != nil {
		return nil, u.admit
	}
	if err := t.lockOwner(ctx, owner); err != nil {
		return nil, err
	}
	return u, nil
}

// settled is the start of the verbs that read or release what owner holds: the txn holds owner's
// lock, and every claim of owner in the pool whose outcome was unknown is settled, so the index
// answers for owner truthfully.
func (t *txn) settled(ctx context.Context, key string, owner allocator.Owner) (*poolUse, error) {
	u, err := t.use(key)
	if err != nil {
		return nil, err
	}
	if err := t.lockOwner(ctx, owner); err != nil {
		return nil, err
	}
	if err := t.b.s.settleOwner(ctx, u.state.name, owner); err != nil {
		return nil, err
	}
	return u, nil
}

// lockOwner makes the txn hold owner's lock, giving up the lock of any other attachment first (GC
// goes through several), so a txn never waits while holding one.
func (t *txn) lockOwner(ctx context.Context, owner allocator.Owner) error {
	if t.locked && t.owner == owner {
		return nil
	}
	t.unlockOwner()
	if err := t.b.s.lockOwner(ctx, owner); err != nil {
		return err
	}
	t.owner, t.locked = owner, true
	return nil
}

func (t *txn) unlockOwner() {
	if t.locked {
		t.b.s.unlockOwner(t.owner)
		t.locked = false
	}
}

// Get returns owner's address in the pool from the index, after settling any claim of owner whose
// outcome is still unknown.
func (t *txn) Get(ctx context.Context, key string, owner allocator.Owner) (allocator.Allocation, bool, error) {
	u, err := t.settled(ctx, key, owner)
	if err != nil {
		return allocator.Allocation{}, false, err
	}
	es := t.b.s.index.owned(u.state.name, owner)
	if len(es) == 0 {
		return allocator.Allocation{}, false, nil
	}
	t.noteHeld(key, es[0])
	return allocationOf(key, u, es[0]), true, nil
}

// noteHeld records an address the attachment already holds for the call's persistent owner, so
// that its IPAMClaim's status is written again when an earlier ADD's write failed: the runtime's
// retry of that ADD finds the address held, and nothing else would write it.
func (t *txn) noteHeld(key string, e entry) {
	cu := t.b.claim
	if cu == nil || e.persistent == "" || cu.owner.Key() != e.persistent {
		return
	}
	for i := range t.b.cfg.Ranges {
		if t.b.cfg.PoolKey(i) == key {
			cu.bound[key] = netip.PrefixFrom(e.addr, t.b.cfg.Ranges[i].Subnet.Bits())
		}
	}
}

// ClaimNext claims a free address: first from the node's own blocks (round-robin after the last
// choice), then from a newly claimed block, and when every block is claimed, from any address of
// the pool still free (borrowing from other nodes' blocks). Choosing happens under the pool's
// node-local lock; the API calls that follow a choice (the reservation's Create, a block's claim,
// borrowing's list, the list of the pool's slices) do not, so a slow API server delays each call by its own requests only, never
// by those of the calls queued before it.
func (t *txn) ClaimNext(ctx context.Context, p allocator.Pool, al *allocator.Allocation) error {
	u, err := t.beginClaim(ctx, p, al.Owner)
	if err != nil {
		return err
	}
	st := u.state
	bs := newBlockSearch() // this call's search for a block to claim
	for {
		if err := lockPool(ctx, st); err != nil {
			return err
		}
		st.cooling.prune(st, p.Now.Add(-u.cooldown))
		c, err := t.choose(ctx, u, p, bs)
		if err != nil {
			unlockPool(st)
			return err
		}
		var name string
		if c.kind == candidate {
			name = ipamv1.ReservationName(u.scope, c.addr)
			st.inflight[name] = c.addr
		}
		unlockPool(st)

		switch c.kind {
		case claimBlock:
			if err := t.claimBlock(ctx, u, p.Range, c.block, bs); err != nil {
				return err
			}
			continue
		case listBlocks:
			if err := t.listBlocks(ctx, u, bs); err != nil {
				return err
			}
			continue
		case awaitBlock:
			if err := waitBlockClaim(ctx, st, c.block); err != nil {
				return err
			}
			continue
		case noBlock:
			return t.borrow(ctx, u, p, al) // every block is claimed
		}

		res, _, err := t.tryCreate(ctx, u, al, c.addr, false)

		// The lock is taken without a bound: its holders make no API call with it, and the
		// inflight mark must go whatever happens.
		st.lock <- struct{}{}
		delete(st.inflight, name)
		switch res {
		case taken:
			st.foreign[name] = true
		case created:
			st.cooling.drop(st, c.addr)
		}
		unlockPool(st)
		if res != taken {
			if err == nil {
				err = t.recordPersistent(p, al)
			}
			return err
		}
		// The next round chooses again, past the address found taken.
	}
}

// choiceKind is what ClaimNext does next.
type choiceKind int

const (
	candidate  choiceKind = iota // create the reservation of choice.addr
	claimBlock                   // claim the new block choice.block
	awaitBlock                   // wait for the node's claim of choice.block in flight, then choose again
	listBlocks                   // list the pool's slices (live), then choose again
	noBlock                      // every block is claimed: borrow
)

type choice struct {
	kind  choiceKind
	addr  netip.Addr
	block *blockClaim
}

// choose picks the next candidate of the node's blocks, or, when those are full, the block to
// claim next (or that the pool's slices must be listed first). The pool's lock is held; choose
// makes no API call.
func (t *txn) choose(ctx context.Context, u *poolUse, p allocator.Pool, bs *blockSearch) (choice, error) {
	s, st := t.b.s, u.state
	if err := s.loadSlices(ctx, st); err != nil {
		return choice{}, err
	}
	s.resumeCursor(st)
	for a := range st.candidates(p.Range, s.claimTakenFn(u)) {
		st.cursor = a
		return choice{kind: candidate, addr: a}, nil
	}
	if st.claiming != nil {
		return choice{kind: awaitBlock, block: st.claiming}, nil
	}
	return s.startBlockClaim(ctx, st, p.Range, bs)
}

// Claim claims the requested al.Addr, or returns ErrAddressInUse naming the holder.
func (t *txn) Claim(ctx context.Context, p allocator.Pool, al *allocator.Allocation) error {
	u, err := t.beginClaim(ctx, p, al.Owner)
	if err != nil {
		return err
	}
	name := ipamv1.ReservationName(u.scope, al.Addr)
	if e, held := t.b.s.index.lookup(name); held {
		return fmt.Errorf("%w: %s in pool %s is held by %s/%s on node %s", allocator.ErrAddressInUse, al.Addr,
			u.state.name, e.owner.ContainerID, e.owner.IfName, t.b.s.node)
	}
	if t.b.s.heldByNode(u, al.Addr) {
		return fmt.Errorf("%w: %s in pool %s is held by another reservation on node %s", allocator.ErrAddressInUse, al.Addr,
			u.state.name, t.b.s.node)
	}
	res, holder, err := t.tryCreate(ctx, u, al, al.Addr, true)
	if res == taken {
		return fmt.Errorf("%w: %s in pool %s is held by %s", allocator.ErrAddressInUse, al.Addr, u.state.name, holder)
	}
	if res == created {
		// A requested address is granted while it cools, and stops cooling. Should the lock not
		// come before the call's end, the entry stays: harmless, as a held address is taken anyway
		// and a later release starts its cool-down afresh.
		if lerr := lockPool(ctx, u.state); lerr == nil {
			if t.b.s.loadSlices(ctx, u.state) == nil {
				u.state.cooling.drop(u.state, al.Addr)
			}
			unlockPool(u.state)
		}
	}
	if err == nil {
		err = t.recordPersistent(p, al)
	}
	return err
}

// recordPersistent notes a claimed address of the call's persistent owner, for its status.
func (t *txn) recordPersistent(p allocator.Pool, al *allocator.Allocation) error {
	if al.Persistent == "" {
		return nil
	}
	cu, err := t.claimFor(al.Persistent)
	if err != nil {
		return err
	}
	cu.bound[p.Key] = netip.PrefixFrom(al.Addr, p.Range.Subnet.Bits())
	return nil
}

// tryCreate creates the reservation of a for al. When another attachment holds a, the outcome is
// taken, and holder names it if wantHolder is set. A reservation of al's own attachment left by an
// earlier attempt of this call whose answer was lost is adopted. Without such an attempt, an
// existing reservation cannot be al's (the index, settled first, says al holds nothing), so it is
// not read. tryCreate touches no pool state: the caller may not hold the pool's lock.
func (t *txn) tryCreate(ctx context.Context, u *poolUse, al *allocator.Allocation, a netip.Addr, wantHolder bool) (outcome, string, error) {
	s := t.b.s
	al.Addr = a
	want := s.newReservation(u, al, t.b.claim)
	got := want.DeepCopy()
	uncertain := false
	err := s.retry(ctx, "create reservation "+want.Name, func(ctx context.Context) error {
		obj := want.DeepCopy()
		err := s.client.Create(ctx, obj)
		switch {
		case err == nil:
			got = obj
		case maybeApplied(err):
			uncertain = true
		}
		return err
	})
	pending := pendingClaim{name: want.Name, pool: u.state.name, owner: al.Owner}
	switch {
	case err == nil:
		t.adopt(u, got)
		return created, "", nil
	case apierrors.IsAlreadyExists(err) && !uncertain && !wantHolder:
		return taken, "", nil
	case apierrors.IsAlreadyExists(err):
		existing := &ipamv1.OverlappingRangeIPReservation{}
		gerr := s.retry(ctx, "read reservation "+want.Name, func(ctx context.Context) error {
			return s.live.Get(ctx, client.ObjectKey{Name: want.Name}, existing)
		})
		switch {
		case apierrors.IsNotFound(gerr):
			return taken, "an attachment that has just released it", nil // gone again: try another
		case gerr != nil:
			if uncertain {
				s.addPending(pending)
			}
			return failed, "", apiFailure("read reservation "+want.Name, gerr)
		case s.ownedBy(existing, u.state.name, al.Owner):
			t.adopt(u, existing)
			return created, "", nil
		}
		return taken, reservation.Holder(existing), nil
	}
	err = apiFailure("create reservation "+want.Name, err)
	if uncertain {
		s.addPending(pending)
		err = fmt.Errorf("%w (reservation %s may exist; it is deleted once the API server answers, unless this attachment is added again first)", err, want.Name)
	}
	return failed, "", err
}

// adopt records a reservation this txn now holds.
func (t *txn) adopt(u *poolUse, r *ipamv1.OverlappingRangeIPReservation) {
	t.b.s.index.put(r)
	t.created = append(t.created, claimRef{name: r.Name, uid: r.UID, pool: u.state.name,
		owner: allocator.Owner{ContainerID: r.Spec.ContainerID, IfName: r.Spec.IfName}, persistent: r.Spec.Owner != nil})
}

// Release deletes owner's reservations in the pool. A reservation already gone is not an error.
func (t *txn) Release(ctx context.Context, p allocator.Pool, owner allocator.Owner) (allocator.Allocation, bool, error) {
	key := p.Key
	if !t.writable {
		return allocator.Allocation{}, false, errReadOnly
	}
	u, err := t.settled(ctx, key, owner)
	if err != nil {
		return allocator.Allocation{}, false, err
	}
	s := t.b.s
	es := s.index.owned(u.state.name, owner)
	if len(es) == 0 {
		return allocator.Allocation{}, false, nil
	}
	for _, e := range es {
		if err := s.deleteReservation(ctx, e.name, e.uid); err != nil {
			if maybeApplied(err) {
				// The Delete may have been applied with its answer lost, and the informer, cut off
				// by the same outage, may not say so for a while: the owner's next call reads the
				// reservation back before the index answers for it (settleOwner).
				s.addPending(pendingClaim{name: e.name, pool: u.state.name, owner: owner})
			}
			return allocator.Allocation{}, false, err
		}
		if err := lockPool(ctx, u.state); err != nil {
			return allocator.Allocation{}, false, err
		}
		// The node's blocks, and what they record as cooling, are known before the release
		// changes them: a DEL may be a restarted agent's first call in the pool.
		if err := s.loadSlices(ctx, u.state); err != nil {
			s.log.Info("Releasing without the node's blocks of the pool", "pool", u.state.name, "err", err)
		}
		if u.cooldown > 0 {
			u.state.cooling.add(u.state, e.addr, p.Now)
		}
		block, giveBack := s.released(u.state, e.addr)
		unlockPool(u.state)
		if giveBack {
			s.giveBack(ctx, u.state, block)
		}
	}
	return allocationOf(key, u, es[0]), true, nil
}

// deleteReservation deletes reservation name if it is still the object uid, retrying while the API
// server does not answer, and removes it from the index.
func (s *Store) deleteReservation(ctx context.Context, name string, uid types.UID) error {
	obj := &ipamv1.OverlappingRangeIPReservation{}
	obj.Name = name
	var opts []client.DeleteOption
	if uid != "" {
		opts = append(opts, client.Preconditions{UID: &uid})
	}
	err := s.retry(ctx, "delete reservation "+name, func(ctx context.Context) error {
		return s.client.Delete(ctx, obj.DeepCopy(), opts...)
	})
	// NotFound: already gone. Conflict: the UID precondition failed, so the name now belongs to
	// another claim and ours is gone.
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return apiFailure("delete reservation "+name, err)
	}
	s.index.remove(name, uid, true)
	return nil
}

// ForEach visits this node's reservations of the pool, in address order. Reservations of other
// nodes are never visited: GC on a node releases only that node's attachments.
func (t *txn) ForEach(_ context.Context, key string, fn func(allocator.Allocation) error) error {
	u, err := t.use(key)
	if err != nil {
		return err
	}
	for _, e := range t.b.s.index.inPool(u.state.name) {
		if err := fn(allocationOf(key, u, e)); err != nil {
			return err
		}
	}
	return nil
}

// HasFree reports whether ClaimNext would find an address. An unclaimed block answers at once;
// otherwise a candidate of the node's blocks counts only once the API server confirms nobody holds
// it (the node's hints may lag other nodes' borrowing), and failing that the pool is listed.
//
// So HasFree costs at most maxProbes reads while the pool has room, but on a pool that is full
// (or nearly, or spread thin over nodes) it lists every reservation of the pool's scope: its cost
// then grows with the allocations of the scope, never with the size of the range. The reads are
// made without the pool's lock, which is held only to choose what to read and to note what was
// found.
func (t *txn) HasFree(ctx context.Context, p allocator.Pool) (bool, error) {
	u, err := t.usePool(p)
	if err != nil {
		return false, err
	}
	s, st := t.b.s, u.state
	// The cache may not show a block another node claimed a moment ago: read it back.
	claimed := map[uint64]bool{}
	for range maxProbes {
		if err := lockPool(ctx, st); err != nil {
			return false, err
		}
		err := s.loadSlices(ctx, st)
		var i uint64
		ok := false
		if err == nil {
			s.resumeCursor(st)
			i, ok, err = s.freeSliceIndex(ctx, st, p.Range, claimed)
		}
		unlockPool(st)
		if err != nil {
			return false, err
		}
		if !ok {
			break
		}
		name := ipamv1.SliceName(st.name, i)
		err = s.retry(ctx, "read slice "+name, func(ctx context.Context) error {
			return s.live.Get(ctx, client.ObjectKey{Name: name}, &ipamv1.IPPoolSlice{})
		})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, apiFailure("read slice "+name, err)
		}
		claimed[i] = true
	}
	if err := lockPool(ctx, st); err != nil {
		return false, err
	}
	var probes []netip.Addr
	for a := range st.candidates(p.Range, s.takenFn(u)) {
		if probes = append(probes, a); len(probes) == maxProbes {
			break
		}
	}
	unlockPool(st)
	for _, a := range probes {
		name := ipamv1.ReservationName(u.scope, a)
		err := s.retry(ctx, "read reservation "+name, func(ctx context.Context) error {
			return s.live.Get(ctx, client.ObjectKey{Name: name}, &ipamv1.OverlappingRangeIPReservation{})
		})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, apiFailure("read reservation "+name, err)
		}
		if err := lockPool(ctx, st); err != nil {
			return false, err
		}
		st.foreign[name] = true
		unlockPool(st)
	}
	taken, err := t.sharedScope(ctx, u)
	if err != nil {
		return false, err
	}
	for range freeIn(p.Range, taken) {
		return true, nil
	}
	return false, nil
}

// rollback deletes what a failed Update created, newest first; a persistently owned address it
// claimed is only unbound, and stays its owner's (node isolation lets no agent delete one; a
// retried ADD binds it again, the owner's end releases it). What cannot be undone in time is left
// pending, for the background loop. ctx is the call's; the undoing outlives its cancellation.
func (t *txn) rollback(ctx context.Context) error {
	if len(t.created) == 0 {
		return nil
	}
	s := t.b.s
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(rollbackTimeout, s.opts.APITimeout))
	defer cancel()
	var errs []error
	for i := len(t.created) - 1; i >= 0; i-- {
		c := t.created[i]
		undo := s.deleteReservation
		if c.persistent {
			undo = func(ctx context.Context, name string, uid types.UID) error {
				return s.removeUser(ctx, name, uid, c.owner)
			}
		}
		if err := undo(ctx, c.name, c.uid); err != nil {
			s.addPending(pendingClaim{name: c.name, pool: c.pool, owner: c.owner})
			errs = append(errs, fmt.Errorf("failed to roll back reservation %s (left for the background loop): %w", c.name, err))
		}
	}
	t.created = nil
	return errors.Join(errs...)
}
