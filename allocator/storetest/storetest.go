// Package storetest is the conformance suite of allocator.Store: one set of behaviour tests that
// every store must pass, whatever holds its state. Each store's own test package runs it:
//
//	storetest.Run(t, storetest.Backend{Fields: `"datastore":"bbolt",...`, Open: ...})
//
// The suite drives a store as the engine does (allocator.New over it) and, where the contract is
// the Txn's own, through Update and View directly. It checks only what allocator.Store promises of
// every store; what one store adds (bbolt's all-or-none releases, the Kubernetes store's slices and
// nodes) stays in that store's tests.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/ipam"
)

// Backend is one store under test.
type Backend struct {
	// Fields are the ipam fields that select the store, as JSON members without braces, such as
	// `"datastore":"kubernetes"`. The suite adds each test's range and network fields after them.
	Fields string
	// Open returns the store that serves one call of config c, as the plugin or the agent would
	// open it. The suite opens a store per call (concurrently in the concurrency test) and closes
	// it when the call returns.
	Open func(c *ipam.Config) (allocator.Store, error)
}

// seq makes the network names of one process's tests distinct, so one backing store (one bbolt
// file, one API server) can serve every test without them seeing each other's pools.
var seq atomic.Int64

// Run runs the whole suite against b, one subtest per behaviour.
func Run(t *testing.T, b Backend) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *fixture)
	}{
		{"claim", testClaim},
		{"claim-next to exhaustion exactly at capacity", testExhaustion},
		{"claim-next is round-robin", testRoundRobin},
		{"requested addresses", testRequested},
		{"idempotent ADD and DEL", testIdempotent},
		{"a failed Update leaves none of its claims", testFailedUpdate},
		{"overlap scopes", testOverlapScopes},
		{"GC", testGC},
		{"HasFree", testHasFree},
		{"View changes nothing", testViewReadOnly},
		{"concurrent claims", testConcurrent},
		{"cool-down: 100 ADDs pass over a cooling address", testCooldownPassesOver},
		{"cool-down: only cooling addresses left, the oldest first", testCooldownOnlyCooling},
		{"cool-down: an address cools for exactly the cool-down", testCooldownExpiry},
		{"cool-down: a requested address is not held back", testCooldownRequested},
		{"cool-down: a pool without one hands a released address straight back", testNoCooldown},
		{"cool-down: concurrent claims and releases", testCooldownConcurrent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, &fixture{t: t, b: b, net: fmt.Sprintf("conformance-%d", seq.Add(1))})
		})
	}
}

// fixture is one test's view of the backend: its own network name, so its pools are its own.
type fixture struct {
	t   *testing.T
	b   Backend
	net string
	// now, when set, is the engine's clock (the cool-down tests move it); else the real one.
	now func() time.Time
}

// config loads a network config named name over the test's network, with the given ipam fields
// (JSON members, such as `"range":"10.0.0.0/29"`) and CNI_ARGS.
func (f *fixture) config(name, fields, cniArgs string) *ipam.Config {
	f.t.Helper()
	return f.configOf(f.net, name, fields, cniArgs)
}

// configOf is config over network_name networkName.
func (f *fixture) configOf(networkName, name, fields, cniArgs string) *ipam.Config {
	f.t.Helper()
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"ipam":{"type":"netpool",%s,"network_name":%q,%s}}`,
		name, f.b.Fields, networkName, fields)
	c, err := ipam.Load([]byte(conf), cniArgs, nil)
	if err != nil {
		f.t.Fatalf("loading %s: %v", conf, err)
	}
	return c
}

// with runs fn with an allocator over a store opened for c, closing it after.
func (f *fixture) with(c *ipam.Config, fn func(*allocator.Allocator, allocator.Store) error) error {
	s, err := f.b.Open(c)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	a := allocator.New(s)
	if f.now != nil {
		a.WithClock(f.now)
	}
	err = fn(a, s)
	if cerr := s.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close: %w", cerr))
	}
	return err
}

func (f *fixture) add(c *ipam.Config, o allocator.Owner) ([]allocator.Allocation, error) {
	var out []allocator.Allocation
	err := f.with(c, func(a *allocator.Allocator, _ allocator.Store) error {
		var err error
		out, err = a.Add(context.Background(), c, o)
		return err
	})
	return out, err
}

func (f *fixture) mustAdd(c *ipam.Config, o allocator.Owner) netip.Addr {
	f.t.Helper()
	got, err := f.add(c, o)
	if err != nil {
		f.t.Fatalf("ADD %s: %v", o.ContainerID, err)
	}
	if len(got) != len(c.Ranges) {
		f.t.Fatalf("ADD %s returned %d allocations for %d ranges", o.ContainerID, len(got), len(c.Ranges))
	}
	return got[0].Addr
}

func (f *fixture) del(c *ipam.Config, o allocator.Owner) ([]allocator.Allocation, error) {
	var out []allocator.Allocation
	err := f.with(c, func(a *allocator.Allocator, _ allocator.Store) error {
		var err error
		out, err = a.Del(context.Background(), c, o)
		return err
	})
	return out, err
}

func (f *fixture) status(c *ipam.Config) error {
	return f.with(c, func(a *allocator.Allocator, _ allocator.Store) error {
		return a.Status(context.Background(), c)
	})
}

// held returns what the store holds in range i of c, by address, as ForEach reports it, and
// checks that ForEach visits in address order.
func (f *fixture) held(c *ipam.Config, i int) map[netip.Addr]allocator.Allocation {
	f.t.Helper()
	out := map[netip.Addr]allocator.Allocation{}
	key := allocator.Pools(c)[i].Key
	err := f.with(c, func(_ *allocator.Allocator, s allocator.Store) error {
		return s.View(context.Background(), func(ctx context.Context, tx allocator.Txn) error {
			var prev netip.Addr
			return tx.ForEach(ctx, key, func(al allocator.Allocation) error {
				if prev.IsValid() && al.Addr.Compare(prev) <= 0 {
					return fmt.Errorf("ForEach visited %s after %s: not in address order", al.Addr, prev)
				}
				prev = al.Addr
				out[al.Addr] = al
				return nil
			})
		})
	})
	if err != nil {
		f.t.Fatalf("listing pool %s: %v", key, err)
	}
	return out
}

func owner(id string) allocator.Owner { return allocator.Owner{ContainerID: id, IfName: "net1"} }

// testClaim: Claim takes exactly the address asked for, records the allocation as given, and a
// second Claim of it by another attachment fails with ErrAddressInUse naming the holder.
func testClaim(t *testing.T, f *fixture) {
	c := f.config("claim", `"range":"10.60.0.0/29"`, "")
	p := allocator.Pools(c)[0]
	want := netip.MustParseAddr("10.60.0.3")
	claim := func(id string) error {
		return f.with(c, func(_ *allocator.Allocator, s allocator.Store) error {
			return s.Update(context.Background(), func(ctx context.Context, tx allocator.Txn) error {
				al := allocator.Allocation{Pool: p.Key, Addr: want, Owner: owner(id), Network: c.Name, Scope: p.Scope}
				return tx.Claim(ctx, p, &al)
			})
		})
	}
	if err := claim("first"); err != nil {
		t.Fatalf("Claim %s: %v", want, err)
	}
	err := claim("second")
	if !errors.Is(err, allocator.ErrAddressInUse) || !strings.Contains(err.Error(), "first/net1") {
		t.Fatalf("second Claim of %s = %v, want ErrAddressInUse naming first/net1", want, err)
	}
	err = f.with(c, func(_ *allocator.Allocator, s allocator.Store) error {
		return s.View(context.Background(), func(ctx context.Context, tx allocator.Txn) error {
			got, ok, err := tx.Get(ctx, p.Key, owner("first"))
			if err != nil {
				return err
			}
			if !ok || got.Addr != want || got.Owner != owner("first") || got.Pool != p.Key || got.Network != c.Name || got.Scope != p.Scope {
				return fmt.Errorf("get = %+v, %v; want %s held by first/net1 in pool %s, network %s, scope %q", got, ok, want, p.Key, c.Name, p.Scope)
			}
			if _, ok, err := tx.Get(ctx, p.Key, owner("second")); err != nil || ok {
				return fmt.Errorf("the refused claimer holds something: %v %v", ok, err)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.held(c, 0)); n != 1 {
		t.Errorf("pool holds %d allocations after one claim, want 1", n)
	}
}

// testExhaustion: a range with a gateway and exclusions hands out exactly its capacity, every
// address allowed and distinct, then ErrPoolExhausted; the one address released is what the next
// ADD gets.
func testExhaustion(t *testing.T, f *fixture) {
	c := f.config("exhaust", `"range":"10.61.0.0/28","gateway":"10.61.0.1","exclude":["10.61.0.5/32","10.61.0.8/30"]`, "")
	r := c.Ranges[0]
	capacity := int(r.Capacity().Int64())
	if capacity != 8 {
		t.Fatalf("capacity = %d, want 8", capacity)
	}
	seen := map[netip.Addr]string{}
	for i := range capacity {
		id := fmt.Sprintf("c%d", i)
		a := f.mustAdd(c, owner(id))
		if err := r.Allowed(a); err != nil {
			t.Errorf("ADD %s got %s, which the range does not allow: %v", id, a, err)
		}
		if prev, dup := seen[a]; dup {
			t.Fatalf("ADD %s got %s, already held by %s", id, a, prev)
		}
		seen[a] = id
	}
	if _, err := f.add(c, owner("one-too-many")); !errors.Is(err, allocator.ErrPoolExhausted) {
		t.Fatalf("ADD past capacity = %v, want ErrPoolExhausted", err)
	}
	if n := len(f.held(c, 0)); n != capacity {
		t.Errorf("pool holds %d allocations at capacity %d", n, capacity)
	}
	released, err := f.del(c, owner("c3"))
	if err != nil || len(released) != 1 {
		t.Fatalf("DEL c3 = %v, %v", released, err)
	}
	if got := f.mustAdd(c, owner("after-release")); got != released[0].Addr {
		t.Errorf("ADD after releasing %s at capacity got %s", released[0].Addr, got)
	}
	if _, err := f.add(c, owner("one-too-many")); !errors.Is(err, allocator.ErrPoolExhausted) {
		t.Errorf("ADD past capacity again = %v, want ErrPoolExhausted", err)
	}
}

// testRoundRobin: an address just released is not handed straight back while others are free,
// so a crash-looping container does not get its old address. The range is a /24, so that what
// every store draws from holds more than one address (the Kubernetes store draws from the node's
// blocks, which are single addresses in a /28).
func testRoundRobin(t *testing.T, f *fixture) {
	c := f.config("rr", `"range":"10.62.0.0/24"`, "")
	first := f.mustAdd(c, owner("a"))
	if _, err := f.del(c, owner("a")); err != nil {
		t.Fatal(err)
	}
	if again := f.mustAdd(c, owner("b")); again == first {
		t.Errorf("ADD after releasing %s got it straight back", first)
	}
}

// testRequested: a requested address is granted when free and allowed; one held by another
// attachment, one the range does not allow, and a second address for an attachment that holds
// one are refused with their own errors and change nothing.
func testRequested(t *testing.T, f *fixture) {
	const fields = `"range":"10.63.0.0/28","gateway":"10.63.0.1","exclude":["10.63.0.9/32"]`
	load := func(ip string) *ipam.Config { return f.config("requested", fields, "IP="+ip) }
	got, err := f.add(load("10.63.0.7"), owner("a"))
	if err != nil || got[0].Addr.String() != "10.63.0.7" {
		t.Fatalf("ADD asking for 10.63.0.7 = %v, %v", got, err)
	}
	for _, tt := range []struct {
		ip, owner string
		wantErr   error
		wantMsg   string
	}{
		{"10.63.0.7", "b", allocator.ErrAddressInUse, "a/net1"},
		{"10.63.0.9", "b", allocator.ErrAddressNotAllowed, "10.63.0.9"},
		{"10.63.0.1", "b", allocator.ErrAddressNotAllowed, "10.63.0.1"},
		{"10.63.0.8", "a", allocator.ErrAttachmentConflict, "10.63.0.7"},
	} {
		_, err := f.add(load(tt.ip), owner(tt.owner))
		if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("%s asking for %s: err = %v, want %v naming %s", tt.owner, tt.ip, err, tt.wantErr, tt.wantMsg)
		}
	}
	held := f.held(load("10.63.0.7"), 0)
	if len(held) != 1 || held[netip.MustParseAddr("10.63.0.7")].Owner != owner("a") {
		t.Errorf("after the refused requests the pool holds %v, want only 10.63.0.7 for a", held)
	}
	// The same request again is the same allocation.
	if got, err := f.add(load("10.63.0.7"), owner("a")); err != nil || got[0].Addr.String() != "10.63.0.7" {
		t.Errorf("repeated ADD asking for 10.63.0.7 = %v, %v", got, err)
	}
}

// testIdempotent: ADD repeated for one attachment returns the same addresses and claims nothing
// more; DEL repeated, or of an attachment never added, succeeds and releases nothing more.
func testIdempotent(t *testing.T, f *fixture) {
	c := f.config("idem", `"ipRanges":[{"range":"10.64.0.0/28"},{"range":"fd64::/120"}]`, "")
	first, err := f.add(c, owner("a"))
	if err != nil || len(first) != 2 {
		t.Fatalf("ADD = %v, %v", first, err)
	}
	for range 2 {
		again, err := f.add(c, owner("a"))
		if err != nil || len(again) != 2 || again[0].Addr != first[0].Addr || again[1].Addr != first[1].Addr {
			t.Fatalf("repeated ADD = %v, %v; want %s and %s", again, err, first[0].Addr, first[1].Addr)
		}
	}
	for i := range c.Ranges {
		if n := len(f.held(c, i)); n != 1 {
			t.Errorf("range %d holds %d allocations after repeated ADDs of one attachment", i, n)
		}
	}
	released, err := f.del(c, owner("a"))
	if err != nil || len(released) != 2 {
		t.Fatalf("DEL = %v, %v; want both addresses released", released, err)
	}
	for _, o := range []string{"a", "never-added"} {
		if released, err := f.del(c, owner(o)); err != nil || len(released) != 0 {
			t.Errorf("DEL of %s, which holds nothing = %v, %v", o, released, err)
		}
	}
	for i := range c.Ranges {
		if n := len(f.held(c, i)); n != 0 {
			t.Errorf("range %d holds %d allocations after DEL", i, n)
		}
	}
}

// testFailedUpdate: a dual-range ADD whose second claim fails leaves nothing behind in the first
// range, so a retry starts clean.
func testFailedUpdate(t *testing.T, f *fixture) {
	const fields = `"ipRanges":[{"range":"10.65.0.0/28"},{"range":"fd65::/120"}]`
	if _, err := f.add(f.config("rollback", fields, "IP=fd65::9"), owner("holder")); err != nil {
		t.Fatal(err)
	}
	c := f.config("rollback", fields, "IP=fd65::9")
	if _, err := f.add(c, owner("loser")); !errors.Is(err, allocator.ErrAddressInUse) {
		t.Fatalf("ADD asking for a held address = %v, want ErrAddressInUse", err)
	}
	for addr, al := range f.held(c, 0) {
		if al.Owner == owner("loser") {
			t.Errorf("the failed ADD left its claim of %s in the first range", addr)
		}
	}
	if n := len(f.held(c, 0)); n != 1 {
		t.Errorf("first range holds %d allocations, want the holder's only", n)
	}
}

// testOverlapScopes: with overlapping ranges on, the pools of one network name never share an
// address; another network name, or a pool with overlapping ranges off, may reuse it.
func testOverlapScopes(t *testing.T, f *fixture) {
	wide := f.config("wide", `"range":"10.66.0.0/29"`, "")
	narrow := f.config("narrow", `"range":"10.66.0.0/30"`, "")
	seen := map[netip.Addr]string{}
	narrowFull := false
	for i := range 6 {
		for _, x := range []struct {
			c    *ipam.Config
			kind string
		}{{narrow, "n"}, {wide, "w"}} {
			id := fmt.Sprintf("%s%d", x.kind, i)
			got, err := f.add(x.c, owner(id))
			if errors.Is(err, allocator.ErrPoolExhausted) {
				narrowFull = narrowFull || x.kind == "n"
				continue
			}
			if err != nil {
				t.Fatalf("ADD %s: %v", id, err)
			}
			if prev, dup := seen[got[0].Addr]; dup {
				t.Errorf("%s and %s both hold %s in one overlap scope", prev, id, got[0].Addr)
			}
			seen[got[0].Addr] = id
		}
	}
	// The /29 holds 6 addresses and the /30 lies inside it: the two pools share those 6.
	if len(seen) != 6 || !narrowFull {
		t.Errorf("one network's overlapping pools handed out %d addresses (narrow exhausted: %v), want 6", len(seen), narrowFull)
	}
	// Another network name has a scope of its own: it gets the addresses the full scope holds.
	other := f.configOf(f.net+"-other", "other", `"range":"10.66.0.0/30"`, "")
	for i := range 2 {
		a := f.mustAdd(other, owner(fmt.Sprintf("other-%d", i)))
		if _, held := seen[a]; !held {
			t.Errorf("network %s got %s, which the full scope does not hold: it did not reuse an address", other.NetworkName, a)
		}
	}
	// With overlapping ranges off, each pool is its own scope: the /29 hands out all 6 addresses
	// although the /30 inside it holds 2 of them.
	own := f.net + "-own"
	ownNarrow := f.configOf(own, "own-narrow", `"range":"10.66.0.0/30","enable_overlapping_ranges":false`, "")
	ownWide := f.configOf(own, "own-wide", `"range":"10.66.0.0/29","enable_overlapping_ranges":false`, "")
	narrowHeld := map[netip.Addr]bool{}
	for i := range 2 {
		narrowHeld[f.mustAdd(ownNarrow, owner(fmt.Sprintf("own-n%d", i)))] = true
	}
	reused := 0
	for i := range 6 {
		if narrowHeld[f.mustAdd(ownWide, owner(fmt.Sprintf("own-w%d", i)))] {
			reused++
		}
	}
	if reused != 2 {
		t.Errorf("the /29 with overlapping ranges off reused %d of the /30's addresses, want 2", reused)
	}
}

// testGC: GC releases the allocations of its own network whose attachment is not valid, and
// nothing of another network sharing the pool; repeated, it releases nothing more.
func testGC(t *testing.T, f *fixture) {
	const fields = `"range":"10.67.0.0/28"`
	mine, theirs := f.config("gc-mine", fields, ""), f.config("gc-theirs", fields, "")
	for _, id := range []string{"keep", "stale1", "stale2"} {
		f.mustAdd(mine, owner(id))
	}
	f.mustAdd(theirs, owner("other-net"))
	gc := func() []allocator.Allocation {
		t.Helper()
		var out []allocator.Allocation
		err := f.with(mine, func(a *allocator.Allocator, _ allocator.Store) error {
			var err error
			out, err = a.GC(context.Background(), mine, []allocator.Owner{owner("keep")})
			return err
		})
		if err != nil {
			t.Fatalf("GC: %v", err)
		}
		return out
	}
	released := gc()
	got := map[string]bool{}
	for _, al := range released {
		got[al.Owner.ContainerID] = true
	}
	if len(released) != 2 || !got["stale1"] || !got["stale2"] {
		t.Errorf("GC released %v, want stale1 and stale2", released)
	}
	if again := gc(); len(again) != 0 {
		t.Errorf("GC repeated released %v", again)
	}
	left := map[string]bool{}
	for _, al := range f.held(mine, 0) {
		left[al.Owner.ContainerID] = true
	}
	if len(left) != 2 || !left["keep"] || !left["other-net"] {
		t.Errorf("after GC the pool holds %v, want keep and other-net", left)
	}
}

// testHasFree: HasFree (STATUS) says yes while an address is free, no at capacity, and yes again
// after a release.
func testHasFree(t *testing.T, f *fixture) {
	c := f.config("hasfree", `"range":"10.68.0.0/29","exclude":["10.68.0.1/32","10.68.0.2/31"]`, "")
	capacity := int(c.Ranges[0].Capacity().Int64())
	if capacity != 3 {
		t.Fatalf("capacity = %d, want 3", capacity)
	}
	for i := range capacity {
		if err := f.status(c); err != nil {
			t.Fatalf("STATUS with %d of %d held = %v, want free", i, capacity, err)
		}
		f.mustAdd(c, owner(fmt.Sprintf("c%d", i)))
	}
	if err := f.status(c); !errors.Is(err, allocator.ErrPoolExhausted) {
		t.Errorf("STATUS at capacity = %v, want ErrPoolExhausted", err)
	}
	if _, err := f.del(c, owner("c1")); err != nil {
		t.Fatal(err)
	}
	if err := f.status(c); err != nil {
		t.Errorf("STATUS after a release = %v, want free", err)
	}
}

// testViewReadOnly: claims and releases inside a View fail and change nothing.
func testViewReadOnly(t *testing.T, f *fixture) {
	c := f.config("view", `"range":"10.69.0.0/29"`, "")
	held := f.mustAdd(c, owner("a"))
	p := allocator.Pools(c)[0]
	err := f.with(c, func(_ *allocator.Allocator, s allocator.Store) error {
		return s.View(context.Background(), func(ctx context.Context, tx allocator.Txn) error {
			al := allocator.Allocation{Pool: p.Key, Owner: owner("b"), Network: c.Name, Scope: p.Scope}
			if err := tx.ClaimNext(ctx, p, &al); err == nil {
				return errors.New("a ClaimNext in a View succeeded")
			}
			al.Addr = netip.MustParseAddr("10.69.0.5")
			if err := tx.Claim(ctx, p, &al); err == nil {
				return errors.New("a Claim in a View succeeded")
			}
			if _, ok, err := tx.Release(ctx, p, owner("a")); err == nil && ok {
				return errors.New("a Release in a View succeeded")
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	got := f.held(c, 0)
	if len(got) != 1 || got[held].Owner != owner("a") {
		t.Errorf("after a View that tried to change state the pool holds %v, want only %s for a", got, held)
	}
}

// testConcurrent: more attachments than addresses ADD at once, each through its own store: exactly
// capacity succeed, each with its own address, and the rest fail with ErrPoolExhausted.
func testConcurrent(t *testing.T, f *fixture) {
	c := f.config("concurrent", `"range":"10.70.0.0/28"`, "")
	capacity := int(c.Ranges[0].Capacity().Int64())
	const callers = 20
	var mu sync.Mutex
	seen := map[netip.Addr]string{}
	exhausted := 0
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			id := fmt.Sprintf("c%d", i)
			got, err := f.add(c, owner(id))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, allocator.ErrPoolExhausted):
				exhausted++
			case err != nil:
				t.Errorf("ADD %s: %v", id, err)
			default:
				if prev, dup := seen[got[0].Addr]; dup {
					t.Errorf("%s and %s both hold %s", prev, id, got[0].Addr)
				}
				seen[got[0].Addr] = id
			}
		})
	}
	wg.Wait()
	if len(seen) != capacity || exhausted != callers-capacity {
		t.Errorf("%d concurrent ADDs on %d addresses: %d succeeded, %d exhausted; want %d and %d",
			callers, capacity, len(seen), exhausted, capacity, callers-capacity)
	}
	if n := len(f.held(c, 0)); n != len(seen) {
		t.Errorf("pool holds %d allocations after %d successful ADDs", n, len(seen))
	}
}
