package allocator_test

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/allocator/storetest"
	"github.com/netpool/netpool/ipam"
)

// memStore is an in-memory allocator.Store for the engine's unit tests: a map per pool and per
// scope, with Update all-or-none by copying. It scans a range address by address, which is fine
// for the small ranges of these tests and nothing else. TestMemStoreConformance holds it to the
// same suite as the real stores, so the engine's tests run against a store that keeps the contract.
type memStore struct {
	mu    sync.Mutex
	state memState
	// fail, when set, makes the Txn method of that name fail with the error.
	fail map[string]error
}

type memState struct {
	pools  map[string]map[netip.Addr]allocator.Allocation
	scopes map[string]map[netip.Addr]bool
	cursor map[string]netip.Addr
	// released are the release times of addresses released under a cool-down, per pool.
	released map[string]map[netip.Addr]time.Time
}

func newMemStore() *memStore {
	return &memStore{state: memState{pools: map[string]map[netip.Addr]allocator.Allocation{},
		scopes: map[string]map[netip.Addr]bool{}, cursor: map[string]netip.Addr{},
		released: map[string]map[netip.Addr]time.Time{}}}
}

func (s memState) clone() memState {
	c := memState{pools: map[string]map[netip.Addr]allocator.Allocation{}, scopes: map[string]map[netip.Addr]bool{},
		cursor: maps.Clone(s.cursor), released: map[string]map[netip.Addr]time.Time{}}
	for k, v := range s.released {
		c.released[k] = maps.Clone(v)
	}
	for k, v := range s.pools {
		c.pools[k] = maps.Clone(v)
	}
	for k, v := range s.scopes {
		c.scopes[k] = maps.Clone(v)
	}
	return c
}

func (s *memStore) Update(ctx context.Context, fn func(context.Context, allocator.Txn) error) error {
	return s.run(ctx, true, fn)
}

func (s *memStore) View(ctx context.Context, fn func(context.Context, allocator.Txn) error) error {
	return s.run(ctx, false, fn)
}

func (s *memStore) run(ctx context.Context, writable bool, fn func(context.Context, allocator.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &memTxn{s: s, st: s.state.clone(), writable: writable}
	if err := fn(ctx, t); err != nil {
		return err
	}
	if writable {
		s.state = t.st
	}
	return nil
}

func (s *memStore) Close() error { return nil }

type memTxn struct {
	s        *memStore
	st       memState
	writable bool
}

func (t *memTxn) failed(method string) error { return t.s.fail[method] }

func (t *memTxn) write() error {
	if !t.writable {
		return fmt.Errorf("memstore: write in a View")
	}
	return nil
}

func (t *memTxn) Get(_ context.Context, pool string, owner allocator.Owner) (allocator.Allocation, bool, error) {
	if err := t.failed("Get"); err != nil {
		return allocator.Allocation{}, false, err
	}
	for _, al := range t.st.pools[pool] {
		if al.Owner == owner {
			return al, true, nil
		}
	}
	return allocator.Allocation{}, false, nil
}

func (t *memTxn) taken(p allocator.Pool, a netip.Addr) (string, bool) {
	if al, ok := t.st.pools[p.Key][a]; ok {
		return al.Owner.ContainerID + "/" + al.Owner.IfName, true
	}
	if p.Scope != "" && t.st.scopes[p.Scope][a] {
		return "another pool of scope " + p.Scope, true
	}
	return "", false
}

func (t *memTxn) put(p allocator.Pool, a *allocator.Allocation) {
	if t.st.pools[p.Key] == nil {
		t.st.pools[p.Key] = map[netip.Addr]allocator.Allocation{}
	}
	t.st.pools[p.Key][a.Addr] = *a
	delete(t.st.released[p.Key], a.Addr)
	if p.Scope != "" {
		if t.st.scopes[p.Scope] == nil {
			t.st.scopes[p.Scope] = map[netip.Addr]bool{}
		}
		t.st.scopes[p.Scope][a.Addr] = true
	}
}

func (t *memTxn) Claim(_ context.Context, p allocator.Pool, a *allocator.Allocation) error {
	if err := t.failed("Claim"); err != nil {
		return err
	}
	if err := t.write(); err != nil {
		return err
	}
	if holder, ok := t.taken(p, a.Addr); ok {
		return fmt.Errorf("%w: %s in pool %s is held by %s", allocator.ErrAddressInUse, a.Addr, p.Key, holder)
	}
	t.put(p, a)
	return nil
}

// next returns the first free allowed address of [from, to] that is not cooling.
func (t *memTxn) next(p allocator.Pool, from, to netip.Addr) (netip.Addr, bool) {
	for a, ok := p.Range.NextAllowed(from); ok && a.Compare(to) <= 0; a, ok = p.Range.NextAllowed(a.Next()) {
		if _, held := t.taken(p, a); !held && !t.cooling(p, a) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func (t *memTxn) cooling(p allocator.Pool, a netip.Addr) bool {
	at, ok := t.st.released[p.Key][a]
	return ok && p.Cooldown > 0 && p.Now.Sub(at) < p.Cooldown
}

// oldestCooling is the free cooling address released longest ago, by a linear scan.
func (t *memTxn) oldestCooling(p allocator.Pool) (netip.Addr, bool) {
	var best netip.Addr
	for a, at := range t.st.released[p.Key] {
		if _, held := t.taken(p, a); held || !t.cooling(p, a) || p.Range.Allowed(a) != nil {
			continue
		}
		if !best.IsValid() || at.Before(t.st.released[p.Key][best]) {
			best = a
		}
	}
	return best, best.IsValid()
}

func (t *memTxn) ClaimNext(_ context.Context, p allocator.Pool, a *allocator.Allocation) error {
	if err := t.failed("ClaimNext"); err != nil {
		return err
	}
	if err := t.write(); err != nil {
		return err
	}
	from := p.Range.Start
	if c, ok := t.st.cursor[p.Key]; ok && c.Next().IsValid() && c.Next().Compare(p.Range.End) <= 0 {
		from = c.Next()
	}
	got, ok := t.next(p, from, p.Range.End)
	if !ok && from != p.Range.Start {
		got, ok = t.next(p, p.Range.Start, from.Prev())
	}
	if !ok {
		got, ok = t.oldestCooling(p)
	}
	if !ok {
		return fmt.Errorf("%w: no free address in pool %s", allocator.ErrPoolExhausted, p.Key)
	}
	a.Addr = got
	t.st.cursor[p.Key] = got
	t.put(p, a)
	return nil
}

func (t *memTxn) Release(ctx context.Context, p allocator.Pool, owner allocator.Owner) (allocator.Allocation, bool, error) {
	if err := t.failed("Release"); err != nil {
		return allocator.Allocation{}, false, err
	}
	if err := t.write(); err != nil {
		return allocator.Allocation{}, false, err
	}
	al, ok, err := t.Get(ctx, p.Key, owner)
	if err != nil || !ok {
		return al, false, err
	}
	delete(t.st.pools[p.Key], al.Addr)
	if p.Cooldown > 0 {
		if t.st.released[p.Key] == nil {
			t.st.released[p.Key] = map[netip.Addr]time.Time{}
		}
		t.st.released[p.Key][al.Addr] = p.Now
	}
	if al.Scope != "" {
		delete(t.st.scopes[al.Scope], al.Addr)
	}
	return al, true, nil
}

func (t *memTxn) ForEach(_ context.Context, pool string, fn func(allocator.Allocation) error) error {
	if err := t.failed("ForEach"); err != nil {
		return err
	}
	for _, a := range slices.SortedFunc(maps.Keys(t.st.pools[pool]), netip.Addr.Compare) {
		if err := fn(t.st.pools[pool][a]); err != nil {
			return err
		}
	}
	return nil
}

func (t *memTxn) HasFree(_ context.Context, p allocator.Pool) (bool, error) {
	if err := t.failed("HasFree"); err != nil {
		return false, err
	}
	_, ok := t.next(p, p.Range.Start, p.Range.End)
	if !ok {
		_, ok = t.oldestCooling(p)
	}
	return ok, nil
}

// TestMemStoreConformance holds the test store to the contract the engine relies on.
func TestMemStoreConformance(t *testing.T) {
	s := newMemStore()
	storetest.Run(t, storetest.Backend{
		Fields: `"datastore":"bbolt","bbolt":{"path":"/unused/by/memstore.db"}`,
		Open:   func(*ipam.Config) (allocator.Store, error) { return s, nil },
	})
}
