package kubestore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/ippool"
)

// The reuse cool-down in the Kubernetes store (allocator/cooldown.go states the rule). A node's
// blocks are its own, so the addresses it released are handed out again by this same agent, which
// keeps when it released each in memory and decides from that. So that a restart does not forget
// them, and so that every other allocator that claims in the pool (another node borrowing, the
// controller's EgressRouter) can pass over them, the agent also records them on the block's
// IPPoolSlice (spec.cooling), written behind: a release marks its block, and one patch per marked
// block about CoolingFlushDelay later carries every release of that block since. A pool without a
// cool-down records nothing and writes nothing more than before.
//
// A release of one of this node's reservations that the agent did not make (the controller's GC,
// a forced release) cools too, from when the informer reports it (cooledElsewhere).
//
// What that does not cover, as docs/kubernetes-mode.md states:
//   - releases within the last CoolingFlushDelay before the agent dies (kill -9, a node crash)
//     are not on the slice yet; the restarted agent resumes its round-robin after the highest
//     address it holds, which makes an immediate reuse of those unlikely, not impossible. A
//     release made while the agent was down is not recorded at all;
//   - an address of another node's block that this node borrowed and released is not recorded:
//     a node writes only its own slices (node isolation). Its cool-down is this agent's memory;
//   - a block records at most ipamv1.MaxSliceCooling addresses, the releases most recent.
//
// A block that holds cooling addresses is not given back, so its records stay where its node
// writes them. The cool-down used is the pool's (ippool.ResolveCooldown), not the engine's
// Pool.Cooldown, so that every config of a pool honours the same one; the clock is the engine's
// (Pool.Now), and so are the times written.

// DefaultCoolingFlushDelay is how long after a release under a cool-down the agent writes its
// block's cooling addresses: the window over which releases are coalesced into one write, and
// the window a crash can lose.
const DefaultCoolingFlushDelay = time.Second

// coolingSet is what one node released under a cool-down in one pool, guarded by the pool's lock.
// Its size is the node's releases within one cool-down.
type coolingSet struct {
	// cooldown is the pool's cool-down as the last Bind resolved it, for cooledElsewhere, which
	// runs outside any call; atomic, as it is read without the pool's lock.
	cooldown atomic.Int64
	at       map[netip.Addr]time.Time
	// order holds the releases oldest first; an entry whose address is no longer in at with that
	// time (claimed since, or released again) is stale and skipped.
	order []cooled
	// byBlock are the cooling addresses of each block, so that a block holding any is kept and
	// its records are written without walking the others.
	byBlock map[uint64]map[netip.Addr]struct{}
	// dirty are the blocks whose records on their slice differ from at; written holds what was
	// last written to (or read from) each block's slice.
	dirty   map[uint64]bool
	written map[uint64][]byte
	// changed is told that a block became dirty (Store.kickCooling); nil in tests of the set.
	changed func()
}

type cooled struct {
	addr netip.Addr
	at   time.Time
}

func (c *coolingSet) has(a netip.Addr) bool {
	_, ok := c.at[a]
	return ok
}

// add starts a's cool-down at t. Releases arrive in time order but for clock steps, so the insert
// is almost always an append.
func (c *coolingSet) add(st *poolState, a netip.Addr, t time.Time) {
	if c.at == nil {
		c.at, c.byBlock = map[netip.Addr]time.Time{}, map[uint64]map[netip.Addr]struct{}{}
	}
	if c.has(a) {
		c.drop(st, a)
	}
	c.at[a] = t
	i, _ := slices.BinarySearchFunc(c.order, t, func(e cooled, t time.Time) int {
		if e.at.After(t) {
			return 1
		}
		return -1
	})
	c.order = slices.Insert(c.order, i, cooled{addr: a, at: t})
	if st.geo.subnet.Contains(a) {
		b := st.geo.index(a)
		if c.byBlock[b] == nil {
			c.byBlock[b] = map[netip.Addr]struct{}{}
		}
		c.byBlock[b][a] = struct{}{}
		c.markDirty(b)
	}
}

// drop ends a's cool-down early: it was claimed.
func (c *coolingSet) drop(st *poolState, a netip.Addr) {
	if !c.unlink(st, a) {
		return
	}
	if st.geo.subnet.Contains(a) {
		c.markDirty(st.geo.index(a))
	}
}

// unlink forgets a; false when it was not cooling.
func (c *coolingSet) unlink(st *poolState, a netip.Addr) bool {
	if !c.has(a) {
		return false
	}
	delete(c.at, a)
	if st.geo.subnet.Contains(a) {
		b := st.geo.index(a)
		if delete(c.byBlock[b], a); len(c.byBlock[b]) == 0 {
			delete(c.byBlock, b)
		}
	}
	return true
}

func (c *coolingSet) markDirty(b uint64) {
	if c.dirty == nil {
		c.dirty = map[uint64]bool{}
	}
	c.dirty[b] = true
	if c.changed != nil {
		c.changed()
	}
}

// prune ends the cool-down of every address released at or before cutoff, and unmarks its block
// as full so that the next scan sees it free. Each release is pruned once. An address that cooled
// is not rewritten on its slice: every reader ignores an entry older than the pool's cool-down,
// and the block's next write leaves it out.
func (c *coolingSet) prune(st *poolState, cutoff time.Time) {
	n := 0
	for _, e := range c.order {
		if e.at.After(cutoff) {
			break
		}
		n++
		if t, ok := c.at[e.addr]; ok && t.Equal(e.at) {
			c.unlink(st, e.addr)
			if st.geo.subnet.Contains(e.addr) {
				delete(st.full, st.geo.index(e.addr))
			}
		}
	}
	c.order = c.order[n:]
	if len(c.order) == 0 {
		c.order = nil // let the backing array go
	}
}

// list returns the cooling addresses, released longest ago first.
func (c *coolingSet) list() []ippool.Cooling {
	var out []ippool.Cooling
	for _, e := range c.order {
		if t, ok := c.at[e.addr]; ok && t.Equal(e.at) {
			out = append(out, ippool.Cooling{Addr: e.addr, ReleasedAt: e.at})
		}
	}
	return out
}

// inBlock reports whether block b holds a cooling address.
func (c *coolingSet) inBlock(b uint64) bool { return len(c.byBlock[b]) > 0 }

// block returns the cooling addresses of block b.
func (c *coolingSet) block(b uint64) []ippool.Cooling {
	out := make([]ippool.Cooling, 0, len(c.byBlock[b]))
	for a := range c.byBlock[b] {
		out = append(out, ippool.Cooling{Addr: a, ReleasedAt: c.at[a]})
	}
	return out
}

// loadCooling takes in the records of one of the node's slices as the agent starts using the pool: an
// address the node holds again is left out, and then the slice is rewritten without it. The pool's
// lock is held.
func (s *Store) loadCooling(st *poolState, o ownSlice, recorded []ipamv1.CoolingAddress) {
	c := &st.cooling
	stale := false
	for _, r := range recorded {
		a, err := netip.ParseAddr(r.Address)
		if a = a.Unmap(); err != nil || !o.prefix.Contains(a) || s.index.heldIn(a, st.name, false, "") {
			stale = true
			continue
		}
		if t, ok := c.at[a]; !ok || r.ReleasedAt.Time.After(t) {
			c.add(st, a, r.ReleasedAt.Time)
		}
	}
	if len(recorded) > 0 {
		if c.written == nil {
			c.written = map[uint64][]byte{}
		}
		c.written[o.index] = coolingJSON(recorded)
	}
	if !stale {
		delete(c.dirty, o.index)
	}
}

// kickCooling tells the writer of cooling records that a block changed.
func (s *Store) kickCooling() {
	select {
	case s.coolingKick <- struct{}{}:
	default:
	}
}

// coolingLoop writes the cooling records of the blocks that changed, coalescing the changes of
// CoolingFlushDelay into one write per block, until ctx ends. A write that fails is tried again
// one delay later.
func (s *Store) coolingLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.coolingKick:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.opts.CoolingFlushDelay):
		}
		wctx, cancel := context.WithTimeout(ctx, s.opts.APITimeout)
		if err := s.FlushCooling(wctx); err != nil {
			s.log.Info("Cooling addresses not recorded yet, trying again", "err", err)
			s.kickCooling()
		}
		cancel()
	}
}

// sliceCoolingWrite is the records one block's slice is to carry.
type sliceCoolingWrite struct {
	st      *poolState
	block   uint64
	slice   string
	records []ipamv1.CoolingAddress
	body    []byte
}

// FlushCooling writes now the cooling records of every block whose records changed (it does not
// wait for CoolingFlushDelay). The agent calls it as it stops, so a graceful restart loses
// nothing; tests call it to count the writes.
func (s *Store) FlushCooling(ctx context.Context) error {
	s.mu.Lock()
	states := make([]*poolState, 0, len(s.pools))
	for _, st := range s.pools {
		states = append(states, st)
	}
	s.mu.Unlock()
	var errs []error
	for _, st := range states {
		writes, err := s.pendingCoolingWrites(ctx, st)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, w := range writes {
			if err := s.writeCooling(ctx, w); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// pendingCoolingWrites takes the dirty blocks of st that are the node's, with the records each is
// to carry; a block that is not the node's (a borrowed address) has no slice of the node to carry
// them and stays in memory only. The dirty marks are cleared; writeCooling sets a failed one again.
func (s *Store) pendingCoolingWrites(ctx context.Context, st *poolState) ([]sliceCoolingWrite, error) {
	if err := lockPool(ctx, st); err != nil {
		return nil, err
	}
	defer unlockPool(st)
	c := &st.cooling
	var out []sliceCoolingWrite
	for b := range c.dirty {
		delete(c.dirty, b)
		k, own := slices.BinarySearchFunc(st.slices, b, func(o ownSlice, b uint64) int { return cmpIndex(o.index, b) })
		if !own {
			continue
		}
		records := ippool.SliceCooling(c.block(b))
		body := coolingJSON(records)
		if bytes.Equal(body, c.written[b]) {
			continue // changed and changed back
		}
		out = append(out, sliceCoolingWrite{st: st, block: b, slice: st.slices[k].name, records: records, body: body})
	}
	return out, nil
}

func cmpIndex(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// coolingJSON is the canonical form of a block's records, to tell whether a write changes them.
func coolingJSON(records []ipamv1.CoolingAddress) []byte {
	if len(records) == 0 {
		return nil
	}
	b, _ := json.Marshal(records) // a slice of plain structs always marshals
	return b
}

// writeCooling patches w's slice with its records (none: the field goes). A slice that is gone
// (given back, or the controller's reclaim of a departed node) needs none.
func (s *Store) writeCooling(ctx context.Context, w sliceCoolingWrite) error {
	var patch struct {
		Spec struct {
			Cooling []ipamv1.CoolingAddress `json:"cooling"`
		} `json:"spec"`
	}
	patch.Spec.Cooling = w.records
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	obj := &ipamv1.IPPoolSlice{}
	obj.Name = w.slice
	what := "record the cooling addresses on slice " + w.slice
	err = s.retry(ctx, what, func(ctx context.Context) error {
		return s.client.Patch(ctx, obj.DeepCopy(), client.RawPatch(types.MergePatchType, body))
	})
	st := w.st
	st.lock <- struct{}{} // without a bound: the outcome must be noted whatever happens
	defer unlockPool(st)
	switch {
	case err == nil:
		if st.cooling.written == nil {
			st.cooling.written = map[uint64][]byte{}
		}
		st.cooling.written[w.block] = w.body
		return nil
	case apierrors.IsNotFound(err):
		return nil
	}
	if st.cooling.dirty == nil {
		st.cooling.dirty = map[uint64]bool{}
	}
	st.cooling.dirty[w.block] = true
	return fmt.Errorf("%s: %w", what, err)
}

// coolingElsewhere returns the addresses of u's pool that other nodes' slices record as cooling at
// now. The cache holds only this node's slices, so the pool's slices are listed live, and only
// under a cool-down: borrowing is the one step that needs other nodes' cooling. The node's
// concurrent borrowers of the pool share the list (share), as they share the list of its scope.
// The pool's lock is not held (it is never held across an API call).
func (s *Store) coolingElsewhere(ctx context.Context, u *poolUse, now time.Time) (map[netip.Addr]time.Time, error) {
	if u.cooldown <= 0 {
		return nil, nil
	}
	st := u.state
	others, err := share(ctx, st, &st.coolingList, "the slices of pool "+st.name,
		func(ctx context.Context) ([]ipamv1.IPPoolSlice, error) { return s.othersCooling(ctx, st.name) }, nil)
	if err != nil {
		return nil, err
	}
	out := map[netip.Addr]time.Time{}
	for _, c := range ippool.CoolingIn(others, u.cooldown, now) {
		out[c.Addr] = c.ReleasedAt
	}
	return out, nil
}

// othersCooling lists the slices of pool, live, paged and by spec.pool, and returns those of other
// nodes that record cooling addresses.
func (s *Store) othersCooling(ctx context.Context, pool string) ([]ipamv1.IPPoolSlice, error) {
	what := "list the slices of pool " + pool + " for their cooling addresses"
	var others []ipamv1.IPPoolSlice
	for cont := ""; ; {
		list := &ipamv1.IPPoolSliceList{}
		err := s.retry(ctx, what, func(ctx context.Context) error {
			return s.live.List(ctx, list, client.MatchingFields{slicePoolField: pool},
				client.Limit(listPage), client.Continue(cont))
		})
		if err != nil {
			return nil, apiFailure(what, err)
		}
		for _, sl := range list.Items {
			if sl.Spec.Node != s.node && len(sl.Spec.Cooling) > 0 {
				others = append(others, sl)
			}
		}
		if cont = list.Continue; cont == "" {
			return others, nil
		}
	}
}

// cooledElsewhere starts the cool-down of an address of this node released by someone else, as
// the informer reports it (its own releases it may also report, racing their record). The
// informer must not wait, so the pool's lock is taken in a goroutine
// of its own, bounded by attemptTimeout; an address this node has claimed again meanwhile is left.
func (s *Store) cooledElsewhere(e entry) {
	st := s.poolStateFor(e.pool)
	if st == nil || st.cooling.cooldown.Load() <= 0 {
		return
	}
	at := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
		defer cancel()
		if lockPool(ctx, st) != nil {
			return
		}
		defer unlockPool(st)
		// An address cooling already was released by this store, whose own time (the engine's
		// clock, under the pool's lock) stands: the informer may report that delete before or
		// after the release recorded it.
		if !st.cooling.has(e.addr) && !s.index.heldIn(e.addr, st.name, false, "") {
			st.cooling.add(st, e.addr, at)
		}
	}()
}
