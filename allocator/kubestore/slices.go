package kubestore

import (
	"context"
	"fmt"
	"iter"
	"net/netip"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/ippool"
	"github.com/netpool/netpool/ipam"
)

// slicePoolField indexes the cached IPPoolSlices by spec.pool, and selects a pool's slices in a
// live list (a selectable field of the CRD).
const slicePoolField = "spec.pool"

// sliceNodeField selects one node's slices (a selectable field of the CRD).
const sliceNodeField = "spec.node"

// listPage is the page size of the live list of a pool's reservations.
const listPage = 1000

// takenFn reports whether this node knows a to be held in u's scope: by one of its own reservations
// (whatever its name), by a Create of this node in flight, or by another attachment that won a
// Create on it. The pool's lock is held.
func (s *Store) takenFn(u *poolUse) func(netip.Addr) bool {
	return func(a netip.Addr) bool {
		name := ipamv1.ReservationName(u.scope, a)
		_, busy := u.state.inflight[name]
		return busy || s.index.holds(a, name) || s.heldByNode(u, a) || u.state.foreign[name]
	}
}

// claimTakenFn is takenFn for ClaimNext: under a cool-down, the node's cooling addresses count as
// taken too, so they are chosen only when nothing else is free (borrow's last resort).
func (s *Store) claimTakenFn(u *poolUse) func(netip.Addr) bool {
	taken := s.takenFn(u)
	if u.cooldown <= 0 {
		return taken
	}
	return func(a netip.Addr) bool { return taken(a) || u.state.cooling.has(a) }
}

// heldByNode reports whether one of this node's reservations holds a in u's scope or in u's pool,
// whatever its name.
func (s *Store) heldByNode(u *poolUse, a netip.Addr) bool {
	return s.index.heldIn(a, u.state.name, u.overlap, u.networkName)
}

// loadSlices reads the node's blocks of the pool from the cache, with the cooling addresses they
// record, once per pool and agent life; later blocks are added as the node claims them.
func (s *Store) loadSlices(ctx context.Context, st *poolState) error {
	if st.loaded {
		return nil
	}
	list, err := s.cachedSlices(ctx, st.name)
	if err != nil {
		return err
	}
	for _, sl := range list {
		if sl.Spec.Node != s.node {
			continue
		}
		if own, ok := st.ownSlice(&sl); ok {
			st.addSlice(own)
			s.loadCooling(st, own, sl.Spec.Cooling) // what a previous life of the agent recorded
		}
	}
	st.loaded = true
	return nil
}

// resumeCursor places the round-robin of the node's first choice in the pool: a restarted agent
// resumes after the highest address the node holds in the pool, where its predecessor most likely
// stopped; starting at the pool's first block would scan every address the node holds before
// finding a free one (95-780 ms at 100,000). The pool's lock is held.
func (s *Store) resumeCursor(st *poolState) {
	if st.resumed {
		return
	}
	st.resumed = true
	if !st.cursor.IsValid() {
		if held := s.index.inPool(st.name); len(held) > 0 {
			st.cursor = held[len(held)-1].addr
		}
	}
}

func (s *Store) cachedSlices(ctx context.Context, pool string) ([]ipamv1.IPPoolSlice, error) {
	var list ipamv1.IPPoolSliceList
	if err := s.cache.List(ctx, &list, client.MatchingFields{slicePoolField: pool}); err != nil {
		return nil, fmt.Errorf("%w: failed to list slices of pool %s from the cache: %w", allocator.ErrStoreUnusable, pool, err)
	}
	return list.Items, nil
}

// ownSlice checks that sl is a block of st's layout and returns it.
func (st *poolState) ownSlice(sl *ipamv1.IPPoolSlice) (ownSlice, bool) {
	p, err := netip.ParsePrefix(sl.Spec.Range)
	if err != nil || p.Bits() != st.geo.bits || !st.geo.subnet.Contains(p.Addr()) {
		return ownSlice{}, false // carved with another layout: not a candidate source
	}
	return ownSlice{index: st.geo.index(p.Addr()), name: sl.Name, prefix: p.Masked()}, true
}

func (st *poolState) addSlice(o ownSlice) {
	i, found := slices.BinarySearchFunc(st.slices, o.index, func(x ownSlice, t uint64) int {
		switch {
		case x.index < t:
			return -1
		case x.index > t:
			return 1
		}
		return 0
	})
	if !found {
		st.slices = slices.Insert(st.slices, i, o)
	}
}

// candidates yields the addresses of the node's blocks that r may hand out and that taken does
// not rule out, starting after the cursor and wrapping once. A block scanned whole without the
// consumer stopping is marked full and skipped until something in it is released.
func (st *poolState) candidates(r ipam.Range, taken func(netip.Addr) bool) iter.Seq[netip.Addr] {
	return func(yield func(netip.Addr) bool) {
		n := len(st.slices)
		if n == 0 {
			return
		}
		k := 0 // the block holding the cursor, or the first block after it
		if st.cursor.IsValid() && st.geo.subnet.Contains(st.cursor) {
			ci := st.geo.index(st.cursor)
			k = slices.IndexFunc(st.slices, func(o ownSlice) bool { return o.index >= ci })
			if k < 0 {
				k = 0
			}
		}
		cur := st.slices[k]
		if !cur.prefix.Contains(st.cursor) {
			for j := range n {
				if !st.scanSlice(st.slices[(k+j)%n], r, taken, yield) {
					return
				}
			}
			return
		}
		// Resume after the cursor, go round the other blocks, and end with the cursor's block
		// from its start up to the cursor.
		if next := st.cursor.Next(); next.IsValid() && cur.prefix.Contains(next) {
			if !scan(next, ipam.LastOf(cur.prefix), r, taken, yield) {
				return
			}
		}
		for j := 1; j < n; j++ {
			if !st.scanSlice(st.slices[(k+j)%n], r, taken, yield) {
				return
			}
		}
		scan(cur.prefix.Addr(), st.cursor, r, taken, yield)
	}
}

// sliceCandidates yields the candidates of one block.
func (st *poolState) sliceCandidates(o ownSlice, r ipam.Range, taken func(netip.Addr) bool) iter.Seq[netip.Addr] {
	return func(yield func(netip.Addr) bool) { st.scanSlice(o, r, taken, yield) }
}

// scanSlice scans block o whole; false means the consumer stopped. A block scanned to its end is
// marked full for the part of it the window covers; a later scan with a window inside that part
// skips it. (A config with fewer exclusions might still find an address there; when the node runs
// out of blocks, borrowing lists the truth and clears every mark.)
func (st *poolState) scanSlice(o ownSlice, r ipam.Range, taken func(netip.Addr) bool, yield func(netip.Addr) bool) bool {
	part, ok := clip(o.prefix, r)
	if !ok {
		return true
	}
	if full, marked := st.full[o.index]; marked && full.Contains(part.First) && full.Contains(part.Last) {
		return true
	}
	if !scan(part.First, part.Last, r, taken, yield) {
		return false
	}
	if !st.inflightIn(o.prefix) { // a Create in flight may yet fail and free its address
		st.full[o.index] = part
	}
	return true
}

// clip returns the part of block p inside r's window.
func clip(p netip.Prefix, r ipam.Range) (ipam.Interval, bool) {
	iv := ipam.Interval{First: p.Addr(), Last: ipam.LastOf(p)}
	if iv.First.Compare(r.Start) < 0 {
		iv.First = r.Start
	}
	if iv.Last.Compare(r.End) > 0 {
		iv.Last = r.End
	}
	return iv, iv.First.Compare(iv.Last) <= 0
}

func (st *poolState) inflightIn(p netip.Prefix) bool {
	for _, a := range st.inflight {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// scan yields the addresses of [from, to] that r allows and taken does not rule out; false means
// the consumer stopped. Exclusions are jumped over in one step.
func scan(from, to netip.Addr, r ipam.Range, taken func(netip.Addr) bool, yield func(netip.Addr) bool) bool {
	a := from
	for {
		var ok bool
		if a, ok = r.NextAllowed(a); !ok || a.Compare(to) > 0 {
			return true
		}
		if !taken(a) && !yield(a) {
			return false
		}
		if a = a.Next(); !a.IsValid() {
			return true
		}
	}
}

// freeSliceIndex returns a block of r's window that no node is known to hold and that holds an
// address r may hand out: the first such block from where the node's search stands (blocks.go).
// also are blocks known to be claimed beyond what the node knows.
func (s *Store) freeSliceIndex(ctx context.Context, st *poolState, r ipam.Range, also map[uint64]bool) (uint64, bool, error) {
	own, err := s.ownBlocks(ctx, st)
	if err != nil {
		return 0, false, err
	}
	held := func(i uint64) bool { return own[i] || also[i] || st.hints.elsewhere[i] }
	i, ok := firstFreeBlock(st.geo, r, held, st.searchStart(r, inUse(s.currentPool(ctx, st))))
	return i, ok, nil
}

// ownBlocks returns the indexes of the node's blocks of the pool: those it claimed, and any other
// slice of the node the cache shows (the cache holds only this node's slices).
func (s *Store) ownBlocks(ctx context.Context, st *poolState) (map[uint64]bool, error) {
	list, err := s.cachedSlices(ctx, st.name)
	if err != nil {
		return nil, err
	}
	own := map[uint64]bool{}
	for _, sl := range list {
		if o, ok := st.ownSlice(&sl); ok {
			own[o.index] = true
		}
	}
	for _, o := range st.slices {
		own[o.index] = true
	}
	return own, nil
}

// blockSearch is one ClaimNext's search for a block to claim (blocks.go): the blocks it found
// held by other nodes, how many Creates met one, and whether it has listed the pool's slices.
type blockSearch struct {
	lost   map[uint64]bool
	misses int
	listed bool
}

func newBlockSearch() *blockSearch { return &blockSearch{lost: map[uint64]bool{}} }

// blockClaim is the node's claim of a new block of a pool, in flight: at most one per pool, so
// that the node's concurrent ADDs that find its blocks full claim one block between them, not one
// each. The others wait for done and choose again.
type blockClaim struct {
	index uint64
	done  chan struct{}
}

// startBlockClaim chooses what the node does once its blocks of r's window are full: claim the
// block blocks.go chooses (marked as being claimed), list the pool's slices first (the node's
// knowledge says every block is held and no list is fresh, or this search met maxBlockProbes
// blocks held elsewhere), or borrow (every block is claimed, as a list showed). The pool's lock
// is held; the claim and the list are made without it (claimBlock, listBlocks).
func (s *Store) startBlockClaim(ctx context.Context, st *poolState, r ipam.Range, bs *blockSearch) (choice, error) {
	i, ok, err := s.freeSliceIndex(ctx, st, r, bs.lost)
	if err != nil {
		return choice{}, err
	}
	if !bs.listed && (!ok && !st.hints.listFresh(time.Now()) || ok && bs.misses >= maxBlockProbes) {
		return choice{kind: listBlocks}, nil
	}
	if !ok {
		return choice{kind: noBlock}, nil
	}
	st.claiming = &blockClaim{index: i, done: make(chan struct{})}
	return choice{kind: claimBlock, block: st.claiming}, nil
}

// claimBlock claims block c for this node by creating its IPPoolSlice, without the pool's lock,
// and then records the outcome under it. A block another node won is remembered as held
// elsewhere, and the search moves on (blocks.go); either way the caller chooses again.
func (t *txn) claimBlock(ctx context.Context, u *poolUse, r ipam.Range, c *blockClaim, bs *blockSearch) error {
	s, st := t.b.s, u.state
	won, err := s.createSlice(ctx, st, c.index)
	// The lock is taken without a bound, as the claim must be cleared whatever happens; holders
	// never make an API call with it.
	st.lock <- struct{}{}
	defer unlockPool(st)
	st.claiming = nil
	close(c.done)
	switch {
	case err != nil:
		return err
	case won:
		st.addSlice(ownSlice{index: c.index, name: ipamv1.SliceName(st.name, c.index), prefix: st.geo.block(c.index)})
		st.hints.claimed(c.index)
	default:
		bs.lost[c.index] = true
		lo, hi := blockWindow(st.geo, r)
		st.hints.heldElsewhere(c.index, lo, hi)
		bs.misses++
	}
	return nil
}

// listBlocks lists the pool's slices once for this search, without the pool's lock, and takes
// what the list shows as the truth about other nodes' blocks. The node's concurrent searches of
// the pool share the list (share): a burst of ADDs that find every block held lists once or twice.
func (t *txn) listBlocks(ctx context.Context, u *poolUse, bs *blockSearch) error {
	s, st := t.b.s, u.state
	listed, err := share(ctx, st, &st.blocksList, "the slices of pool "+st.name,
		func(ctx context.Context) (map[uint64]bool, error) { return s.listedSlices(ctx, st) }, nil)
	if err != nil {
		return err
	}
	if err := lockPool(ctx, st); err != nil {
		return err
	}
	defer unlockPool(st)
	own, err := s.ownBlocks(ctx, st)
	if err != nil {
		return err
	}
	st.hints.learnList(listed, own, time.Now())
	for j := range listed {
		bs.lost[j] = true
	}
	bs.listed = true
	return nil
}

// createSlice creates the IPPoolSlice of block i for this node. won is false when another node
// holds it; a block released again meanwhile is not won either, and the next choice may claim it.
// Only when an earlier attempt's answer was lost is an AlreadyExists read back (it may be this
// node's own Create): a plain collision costs one request.
func (s *Store) createSlice(ctx context.Context, st *poolState, i uint64) (won bool, err error) {
	sl := &ipamv1.IPPoolSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: ipamv1.SliceName(st.name, i),
			Labels: map[string]string{
				ipamv1.NodeLabel: ipamv1.LabelValue(s.node),
				ipamv1.PoolLabel: ipamv1.LabelValue(st.name),
			},
		},
		Spec: ipamv1.IPPoolSliceSpec{Pool: st.name, Range: st.geo.block(i).String(), Node: s.node},
	}
	uncertain := false
	err = s.retry(ctx, "create slice "+sl.Name, func(ctx context.Context) error {
		err := s.client.Create(ctx, sl.DeepCopy())
		uncertain = uncertain || err != nil && maybeApplied(err)
		return err
	})
	if apierrors.IsAlreadyExists(err) && uncertain {
		existing := &ipamv1.IPPoolSlice{}
		err = s.retry(ctx, "read slice "+sl.Name, func(ctx context.Context) error {
			return s.live.Get(ctx, client.ObjectKey{Name: sl.Name}, existing)
		})
		if apierrors.IsNotFound(err) {
			return false, nil // released again in between
		}
		if err == nil {
			return existing.Spec.Node == s.node, nil
		}
	}
	if apierrors.IsAlreadyExists(err) {
		return false, nil // another node holds the block
	}
	if err != nil {
		return false, apiFailure("claim slice "+sl.Name, err)
	}
	return true, nil
}

// waitBlockClaim waits until another call's claim of a block ends, or ctx does.
func waitBlockClaim(ctx context.Context, st *poolState, c *blockClaim) error {
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: timed out waiting for this node's claim of block %s of pool %s: %w",
			allocator.ErrStoreBusy, st.geo.block(c.index), st.name, ctx.Err())
	}
}

// released updates the node's blocks after it released a: the block is no longer full, and a
// block left with none of the node's reservations is to be given back when the node holds another
// block of the pool, so idle blocks return to nodes that need them. The pool's lock is held; the
// block to give back, if any, is no longer among the node's, and the caller gives it back once it
// has let go of the lock (giveBack).
func (s *Store) released(st *poolState, a netip.Addr) (ownSlice, bool) {
	if !st.geo.subnet.Contains(a) {
		return ownSlice{}, false
	}
	i := st.geo.index(a)
	delete(st.full, i)
	k := slices.IndexFunc(st.slices, func(o ownSlice) bool { return o.index == i })
	if k < 0 || len(st.slices) < 2 || s.index.countIn(st.name, st.slices[k].prefix) > 0 ||
		st.cooling.inBlock(i) || st.inflightIn(st.slices[k].prefix) {
		return ownSlice{}, false // a block with cooling addresses stays: given back, another node would reuse them
	}
	o := st.slices[k]
	st.slices = slices.Delete(st.slices, k, k+1)
	return o, true
}

// giveBack deletes the IPPoolSlice of block o, which released took from the node's blocks, without
// the pool's lock. Giving a block back is best effort: a block is only a hint, so failing to delete
// it costs nothing but its reuse, and the node keeps it.
func (s *Store) giveBack(ctx context.Context, st *poolState, o ownSlice) {
	obj := &ipamv1.IPPoolSlice{}
	obj.Name = o.name
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	err := s.client.Delete(actx, obj)
	if err == nil || apierrors.IsNotFound(err) {
		return
	}
	s.log.Info("Keeping an empty slice, giving it back failed", "slice", o.name, "err", err)
	st.lock <- struct{}{}
	st.addSlice(o)
	unlockPool(st)
}

// releasedUnlocked is released for a caller that does not hold the pool's lock: it takes it, and
// gives the block back after letting go of it. A lock not had within ctx leaves the blocks as
// they are, which costs a block's reuse, never an address.
func (s *Store) releasedUnlocked(ctx context.Context, st *poolState, a netip.Addr) {
	if lockPool(ctx, st) != nil {
		return
	}
	o, give := s.released(st, a)
	unlockPool(st)
	if give {
		s.giveBack(ctx, st, o)
	}
}

// borrow claims any free address of the pool when every block is claimed and the node's own are
// full. It lists the addresses held in the pool's scope (this costs what the scope holds, and
// happens only when the pool is nearly full or its blocks are spread thin) and creates a
// reservation on the first address nobody holds, so the pool is exhausted exactly at its capacity.
// The list and the Creates are made without the pool's lock, which is held only to choose each
// candidate: the node's concurrent borrowers then try different addresses at once rather than one
// after another.
func (t *txn) borrow(ctx context.Context, u *poolUse, p allocator.Pool, al *allocator.Allocation) error {
	s, st := t.b.s, u.state
	taken, err := t.sharedScope(ctx, u)
	if err != nil {
		return err
	}
	// What the list does not show yet, the node knows: its own Creates since (its concurrent
	// borrowers', in the index), those in flight, and addresses found taken.
	known := s.takenFn(u)
	// try creates the reservation of a if it is still a candidate (ok false: it is not, or it was
	// taken); the pool's lock is not held.
	try := func(a netip.Addr, eligible func(netip.Addr) bool) (done bool, err error) {
		if err := lockPool(ctx, st); err != nil {
			return false, err
		}
		name := ipamv1.ReservationName(u.scope, a)
		if known(a) || !eligible(a) {
			unlockPool(st)
			return false, nil
		}
		st.inflight[name] = a
		unlockPool(st)
		res, _, err := t.tryCreate(ctx, u, al, a, false)
		st.lock <- struct{}{} // without a bound: the inflight mark must go whatever happens
		defer unlockPool(st)
		delete(st.inflight, name)
		switch res {
		case created:
			st.cursor = a
			st.cooling.drop(st, a)
			return true, nil
		case failed:
			return false, err
		}
		st.foreign[name] = true
		return false, nil
	}
	// Cooling: this node's releases, and those other nodes record on their slices.
	elsewhere, err := s.coolingElsewhere(ctx, u, p.Now)
	if err != nil {
		return err
	}
	cooldown := u.cooldown > 0
	notCooling := func(a netip.Addr) bool {
		_, cools := elsewhere[a]
		return !cooldown || !cools && !st.cooling.has(a)
	}
	for a := range freeIn(p.Range, taken) {
		if done, err := try(a, notCooling); done || err != nil {
			return err
		}
	}
	// Only cooling addresses are left: the one released longest ago, if nobody took it meanwhile.
	if cooldown {
		if err := lockPool(ctx, st); err != nil {
			return err
		}
		last := st.cooling.list()
		unlockPool(st)
		for a, at := range elsewhere {
			last = append(last, ippool.Cooling{Addr: a, ReleasedAt: at})
		}
		ippool.SortCooling(last)
		anyway := func(netip.Addr) bool { return true }
		for _, c := range last {
			if p.Range.Allowed(c.Addr) != nil {
				continue
			}
			if _, held := slices.BinarySearchFunc(taken, c.Addr, netip.Addr.Compare); held {
				continue
			}
			if done, err := try(c.Addr, anyway); done || err != nil {
				return err
			}
		}
	}
	// The message names the IPPool object and how to read it: the pool's status and Events say who
	// holds what, and a NAD author may not know which pool an inline range became.
	return fmt.Errorf("%w: no free address in IPPool %s (window %s-%s, capacity %s): every address is reserved; see kubectl describe ippools.ipam.netpool.io %s",
		allocator.ErrPoolExhausted, st.name, p.Range.Start, p.Range.End, capacityText(p.Range), st.name)
}

// scopeView is what a list of a pool's scope shows (listScope): the addresses held, sorted, and
// the names of other nodes' reservations among them.
type scopeView struct {
	taken   []netip.Addr
	foreign map[string]bool
}

// sharedScope returns the addresses held in u's scope, from a list the node's concurrent borrowers
// of the pool share (share). The pool's lock is not held.
func (t *txn) sharedScope(ctx context.Context, u *poolUse) ([]netip.Addr, error) {
	s, st := t.b.s, u.state
	v, err := share(ctx, st, &st.scopeList, "the addresses of pool "+st.name,
		func(ctx context.Context) (scopeView, error) {
			taken, foreign, err := s.listScope(ctx, u)
			return scopeView{taken: taken, foreign: foreign}, err
		},
		func(v scopeView) { st.applyScope(v.foreign) })
	return v.taken, err
}

// listScope lists, live and page by page, the addresses held in u's scope inside the pool's range:
// the reservations of every pool of the network when overlapping ranges are on (their names are
// what makes addresses unique), else those of the pool. foreign names the reservations of other
// nodes among them, for applyScope. The pool's lock is not held.
func (s *Store) listScope(ctx context.Context, u *poolUse) (taken []netip.Addr, foreign map[string]bool, err error) {
	st := u.state
	sel := []client.ListOption{client.MatchingLabels{ipamv1.PoolLabel: ipamv1.LabelValue(st.name)}}
	what := "list reservations of pool " + st.name
	if u.overlap {
		sel = []client.ListOption{client.MatchingFields{"spec.networkName": u.networkName}}
		what = fmt.Sprintf("list reservations of network %q", u.networkName)
	}
	foreign = map[string]bool{}
	cont := ""
	for {
		var list ipamv1.OverlappingRangeIPReservationList
		err := s.retry(ctx, what, func(ctx context.Context) error {
			return s.live.List(ctx, &list, append(sel, client.Limit(listPage), client.Continue(cont))...)
		})
		if err != nil {
			return nil, nil, apiFailure(what, err)
		}
		for i := range list.Items {
			r := &list.Items[i]
			if a, ok := addrOf(r); ok && st.geo.subnet.Contains(a) {
				taken = append(taken, a)
				if r.Spec.Node != s.node {
					foreign[r.Name] = true
				}
			}
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	slices.SortFunc(taken, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(taken), foreign, nil
}

// applyScope refreshes the node's hints from a list of the scope: foreign marks and full blocks
// are recomputed from the truth. The pool's lock is held.
func (st *poolState) applyScope(foreign map[string]bool) {
	st.foreign = foreign
	clear(st.full)
}

// freeIn yields the addresses r may hand out that are not in taken (sorted), walking the gaps.
func freeIn(r ipam.Range, taken []netip.Addr) iter.Seq[netip.Addr] {
	return func(yield func(netip.Addr) bool) {
		j := 0
		a := r.Start
		for {
			var ok bool
			if a, ok = r.NextAllowed(a); !ok {
				return
			}
			for j < len(taken) && taken[j].Compare(a) < 0 {
				j++
			}
			if j >= len(taken) || taken[j] != a {
				if !yield(a) {
					return
				}
			}
			if a = a.Next(); !a.IsValid() || a.Compare(r.End) > 0 {
				return
			}
		}
	}
}
