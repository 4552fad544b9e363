package kubestore

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// Choosing the next block without watching other nodes' slices.
//
// The agent's cache holds only its own node's slices (store.go), so another node's claim sends it
// no watch event and its memory does not grow with the cluster's slices (DESIGN.md, invariant 9).
// Which blocks other nodes hold, it learns by claiming: a Create that meets AlreadyExists marks
// the block as held elsewhere. To make such meetings rare without knowing the other nodes' blocks:
//
//   - a node's first block of a pool is the lowest of the window while the pool's status counts no
//     allocation (a node alone in a new pool fills it from its start), else a random block of the
//     window, so that the nodes of a busy pool do not all try its first block;
//   - each next block follows the node's last one, so a node's blocks form runs;
//   - after a block found held elsewhere, the node goes on from a random block of the window, so
//     nodes spread over the window instead of queueing behind each other (a sequential search
//     would cost every node one failed Create per block claimed before it, O(nodes) per claim);
//   - after maxBlockProbes such blocks in one claim, or when the node's knowledge says every block
//     is held, the node lists the names of the pool's slices once (live, paged, metadata only) and
//     takes the first block the list shows free. Only then does it conclude that every block is
//     claimed and borrow, so a pool is still exhausted exactly at its capacity.
//
// In a window whose blocks are a fraction f claimed, a claim costs about 1/(1-f) Creates on
// average (docs/scale.md has the measured figures); the list is the price of a crowded window, where
// borrowing (which lists every reservation of the pool) is near anyway.

// maxBlockProbes is how many blocks one claim may find held elsewhere before it lists the pool's
// slices.
const maxBlockProbes = 8

// maxKnownElsewhere bounds the blocks a node remembers as held by other nodes in one pool. The
// memory is a hint: once full it is forgotten, and a forgotten block costs one failed Create more.
const maxKnownElsewhere = 4096

// listTrusted is how long a list that showed every block claimed is believed: within it, a node
// whose knowledge says every block is held borrows without listing the slices again (borrowing
// lists the truth about addresses, so a block given back meanwhile costs nothing but its use).
const listTrusted = time.Minute

// blockHints is what a node knows of a pool's blocks beyond its own, guarded by the pool's lock.
type blockHints struct {
	// elsewhere are blocks found held by other nodes: AlreadyExists on their claim, or a list.
	elsewhere map[uint64]bool
	// listed is when elsewhere was last filled from a list of every slice of the pool; zero when
	// it has not been, or has lost some of what the list showed.
	listed time.Time
	// next is where the search for the next block starts, once set.
	next    uint64
	hasNext bool
}

// heldElsewhere records block i as another node's and moves the search to a random block of the
// window [lo, hi].
func (h *blockHints) heldElsewhere(i, lo, hi uint64) {
	if h.elsewhere == nil || len(h.elsewhere) >= maxKnownElsewhere {
		h.elsewhere, h.listed = map[uint64]bool{}, time.Time{}
	}
	h.elsewhere[i] = true
	h.next, h.hasNext = lo+rand.Uint64N(hi-lo+1), true
}

// claimed records that the node claimed block i: the search goes on after it.
func (h *blockHints) claimed(i uint64) {
	delete(h.elsewhere, i)
	h.next, h.hasNext = i+1, true
}

// learnList replaces what the node knew of other nodes' blocks by a list of the pool's slices
// (own blocks excluded), when it fits the bound.
func (h *blockHints) learnList(listed, own map[uint64]bool, now time.Time) {
	h.elsewhere, h.listed = nil, time.Time{}
	if len(listed) > maxKnownElsewhere {
		return
	}
	h.elsewhere = map[uint64]bool{}
	for i := range listed {
		if !own[i] {
			h.elsewhere[i] = true
		}
	}
	h.listed = now
}

// listFresh reports whether the node's knowledge comes from a list recent enough to trust when it
// says every block is held.
func (h *blockHints) listFresh(now time.Time) bool {
	return !h.listed.IsZero() && now.Sub(h.listed) < listTrusted
}

// blockWindow returns the indexes of the first and last blocks of r's window.
func blockWindow(g geometry, r ipam.Range) (lo, hi uint64) {
	return g.index(r.Start), g.index(r.End)
}

// searchStart is where the node looks for its next block of r's window: its hint, else after the
// highest block it holds in the window, else the window's first block when the pool is unused and
// a random block when it is not.
func (st *poolState) searchStart(r ipam.Range, used bool) uint64 {
	lo, hi := blockWindow(st.geo, r)
	from := lo
	switch {
	case st.hints.hasNext:
		from = st.hints.next
	case slices.ContainsFunc(st.slices, func(o ownSlice) bool { return o.index >= lo && o.index <= hi }):
		for _, o := range st.slices {
			if o.index >= lo && o.index <= hi {
				from = o.index + 1
			}
		}
	case used:
		from = lo + rand.Uint64N(hi-lo+1)
	}
	if from < lo || from > hi {
		return lo
	}
	return from
}

// inUse reports whether the pool's status counts any allocation.
func inUse(p *ipamv1.IPPool) bool {
	return p.Status.Allocated != nil && *p.Status.Allocated > 0
}

// firstFreeBlock returns the first block of r's window, from block from on and wrapping round to
// the window's start, that held does not rule out and that holds an address r may hand out.
func firstFreeBlock(g geometry, r ipam.Range, held func(uint64) bool, from uint64) (uint64, bool) {
	lo, hi := blockWindow(g, r)
	if i, ok := scanBlocks(g, r, held, from, hi); ok {
		return i, true
	}
	if from == lo {
		return 0, false
	}
	return scanBlocks(g, r, held, lo, from-1)
}

// scanBlocks returns the first block of [from, to] that held does not rule out and that holds an
// address r may hand out. Blocks that exclusions empty are jumped over in one step.
func scanBlocks(g geometry, r ipam.Range, held func(uint64) bool, from, to uint64) (uint64, bool) {
	i := from
	for {
		if held(i) {
			if i == to {
				return 0, false
			}
			i++
			continue
		}
		block := g.block(i)
		first := block.Addr()
		if first.Compare(r.Start) < 0 {
			first = r.Start
		}
		a, ok := r.NextAllowed(first)
		if !ok {
			return 0, false
		}
		if block.Contains(a) {
			return i, true
		}
		if next := g.index(a); next > i && next <= to {
			i = next // the rest of the block is excluded: jump to the block of a
			continue
		}
		return 0, false
	}
}

// listedSlices lists, live and page by page, the block indexes of st's pool that some slice
// holds, whoever's: the names of the pool's slices (metadata only), each of which is
// SliceName(pool, index). A name is the lock of its block whatever the slice's layout.
func (s *Store) listedSlices(ctx context.Context, st *poolState) (map[uint64]bool, error) {
	what := "list the slices of pool " + st.name
	out := map[uint64]bool{}
	cont := ""
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(ipamv1.GroupVersion.WithKind("IPPoolSliceList"))
		err := s.retry(ctx, what, func(ctx context.Context) error {
			return s.live.List(ctx, list, client.MatchingFields{slicePoolField: st.name},
				client.Limit(listPage), client.Continue(cont))
		})
		if err != nil {
			return nil, apiFailure(what, err)
		}
		for _, m := range list.Items {
			if i, ok := sliceIndexOf(st.name, m.Name); ok {
				out[i] = true
			}
		}
		if cont = list.Continue; cont == "" {
			return out, nil
		}
	}
}

// sliceIndexOf returns the block index a slice of pool named name stands for: the inverse of
// ipamv1.SliceName.
func sliceIndexOf(pool, name string) (uint64, bool) {
	dot := strings.LastIndexByte(name, '.')
	if dot < 0 {
		return 0, false
	}
	i, err := strconv.ParseUint(name[dot+1:], 10, 64)
	if err != nil || ipamv1.SliceName(pool, i) != name {
		return 0, false
	}
	return i, true
}
