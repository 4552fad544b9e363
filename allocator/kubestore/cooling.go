package kubestore

import (
	"context"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"
)

// The reuse cool-down in the Kubernetes store (allocator/cooldown.go states the rule) is a memory
// of the node agent, not an API object: a node's blocks are its own, so the addresses it released
// are handed out again by this same agent, which remembers when it released them. Releasing under
// a cool-down therefore costs no API write beyond the reservation's Delete it already made.
//
// A release of one of this node's reservations that the agent did not make (the controller's GC,
// a forced release) cools too, from when the informer reports it (cooledElsewhere).
//
// What that does not cover, as docs/kubernetes-mode.md states:
//   - an agent restart forgets the cooling addresses (the restarted agent resumes its round-robin
//     after the highest address it holds, which makes an immediate reuse unlikely, not impossible),
//     and so does a release made while the agent was down;
//   - another node borrowing from this node's blocks, once every block is claimed, does not know
//     this node's cooling addresses. A block that holds cooling addresses is not given back.
//
// The cool-down used is the pool's (ippool.ResolveCooldown), not the engine's Pool.Cooldown, so
// that every config of a pool honours the same one; the clock is the engine's (Pool.Now).

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
	// perBlock counts the cooling addresses of each block, so that a block holding any is kept.
	perBlock map[uint64]int
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
		c.at, c.perBlock = map[netip.Addr]time.Time{}, map[uint64]int{}
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
		c.perBlock[st.geo.index(a)]++
	}
}

// drop ends a's cool-down early: it was claimed.
func (c *coolingSet) drop(st *poolState, a netip.Addr) {
	if !c.has(a) {
		return
	}
	delete(c.at, a)
	if st.geo.subnet.Contains(a) {
		i := st.geo.index(a)
		if c.perBlock[i]--; c.perBlock[i] <= 0 {
			delete(c.perBlock, i)
		}
	}
}

// prune ends the cool-down of every address released at or before cutoff, and unmarks its block
// as full so that the next scan sees it free. Each release is pruned once.
func (c *coolingSet) prune(st *poolState, cutoff time.Time) {
	n := 0
	for _, e := range c.order {
		if e.at.After(cutoff) {
			break
		}
		n++
		if t, ok := c.at[e.addr]; ok && t.Equal(e.at) {
			c.drop(st, e.addr)
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

// oldestFirst yields the cooling addresses, released longest ago first.
func (c *coolingSet) oldestFirst(yield func(netip.Addr) bool) {
	for _, e := range c.order {
		if t, ok := c.at[e.addr]; ok && t.Equal(e.at) && !yield(e.addr) {
			return
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

// inBlock reports whether block i holds a cooling address.
func (c *coolingSet) inBlock(i uint64) bool { return c.perBlock[i] > 0 }
