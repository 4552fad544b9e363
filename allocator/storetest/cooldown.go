package storetest

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/netpool/netpool/allocator"
)

// The reuse cool-down's cases (allocator/cooldown.go states the rule). Each moves the engine's
// clock instead of sleeping. Every setup is chosen so that a store ignoring the cool-down would
// hand out the cooling address, so each case can fail.

// clock is a settable engine clock, safe for concurrent calls.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// t0 is the instant the cool-down cases start at.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// withClock gives f a clock at t0.
func withClock(f *fixture) *clock {
	c := &clock{t: t0}
	f.now = c.now
	return c
}

// releaseRequested adds owner id with the requested address ip under fields, and releases it.
// A requested address does not move the round-robin cursor, so a fresh pool's next ClaimNext
// starts at the window's first address again.
func (f *fixture) releaseRequested(name, fields, id, ip string) netip.Addr {
	f.t.Helper()
	c := f.config(name, fields, "IP="+ip)
	got := f.mustAdd(c, owner(id))
	if got.String() != ip {
		f.t.Fatalf("ADD asking for %s got %s", ip, got)
	}
	if rel, err := f.del(c, owner(id)); err != nil || len(rel) != 1 {
		f.t.Fatalf("DEL of %s = %v, %v; want it released", id, rel, err)
	}
	return got
}

// testCooldownPassesOver: X, the window's first address, released with a cool-down of 1 h; the
// next 100 ADDs (the pool keeps free space) never get it, though each starts its search at X.
func testCooldownPassesOver(t *testing.T, f *fixture) {
	clk := withClock(f)
	const fields = `"range":"10.75.0.0/24","reuseCooldown":"1h"`
	x := f.releaseRequested("cool", fields, "x", "10.75.0.1")
	c := f.config("cool", fields, "")
	for i := range 100 {
		clk.set(t0.Add(time.Duration(i) * 30 * time.Second)) // the 100 ADDs span 50 minutes
		if got := f.mustAdd(c, owner(fmt.Sprintf("p%d", i))); got == x {
			t.Fatalf("ADD %d, %v after its release, got the cooling %s", i, clk.now().Sub(t0), x)
		}
	}
	if n := len(f.held(c, 0)); n != 100 {
		t.Errorf("pool holds %d allocations after 100 ADDs, want 100", n)
	}
}

// testCooldownOnlyCooling: in a six-address window held whole, three addresses released in turn
// are what remains; ADDs get them oldest release first (round-robin would start with the newest,
// the one after the cursor), then the pool is exhausted at its capacity.
func testCooldownOnlyCooling(t *testing.T, f *fixture) {
	clk := withClock(f)
	c := f.config("cool-full", `"range":"10.71.0.0/29","reuseCooldown":"1h"`, "")
	addrs := map[string]netip.Addr{}
	for i := range 6 {
		id := fmt.Sprintf("a%d", i)
		addrs[id] = f.mustAdd(c, owner(id))
	}
	// Released oldest first: a2, a4, a0. Round-robin from the cursor (after a5) would give a0's.
	for i, id := range []string{"a2", "a4", "a0"} {
		clk.set(t0.Add(time.Duration(i) * time.Minute))
		if _, err := f.del(c, owner(id)); err != nil {
			t.Fatal(err)
		}
	}
	clk.set(t0.Add(10 * time.Minute))
	if err := f.status(c); err != nil {
		t.Errorf("STATUS with only cooling addresses free = %v, want nil (ClaimNext would succeed)", err)
	}
	for i, want := range []string{"a2", "a4", "a0"} {
		if got := f.mustAdd(c, owner(fmt.Sprintf("b%d", i))); got != addrs[want] {
			t.Errorf("ADD b%d got %s, want %s (released by %s, the oldest release left)", i, got, addrs[want], want)
		}
	}
	if _, err := f.add(c, owner("b3")); !errors.Is(err, allocator.ErrPoolExhausted) {
		t.Errorf("ADD into the full window = %v, want ErrPoolExhausted", err)
	}
}

// testCooldownExpiry: window .1-.4 with X = .2 released at t0, .4 held, and an ADD taking .1 so the
// cursor points at X. Just before an hour has passed the next ADD passes over X for the free .3;
// at exactly an hour X has cooled and, being next in round-robin order, is what the ADD gets.
func testCooldownExpiry(t *testing.T, f *fixture) {
	for i, tt := range []struct {
		name  string
		after time.Duration
		want  string
	}{
		{"one nanosecond before an hour", time.Hour - time.Nanosecond, "10.72.%d.3"},
		{"at an hour", time.Hour, "10.72.%d.2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sub := &fixture{t: t, b: f.b, net: fmt.Sprintf("%s-%d", f.net, i)}
			clk := withClock(sub)
			octet := i
			fields := fmt.Sprintf(`"range":"10.72.%d.0/24","range_start":"10.72.%d.1","range_end":"10.72.%d.4","reuseCooldown":"1h"`, octet, octet, octet)
			sub.releaseRequested("cool-expiry", fields, "x", fmt.Sprintf("10.72.%d.2", octet))
			if got := sub.mustAdd(sub.config("cool-expiry", fields, fmt.Sprintf("IP=10.72.%d.4", octet)), owner("held")); got.String() != fmt.Sprintf("10.72.%d.4", octet) {
				t.Fatalf("ADD asking for .4 got %s", got)
			}
			c := sub.config("cool-expiry", fields, "")
			if got := sub.mustAdd(c, owner("first")); got.String() != fmt.Sprintf("10.72.%d.1", octet) {
				t.Fatalf("first ADD got %s, want the window's first address", got)
			}
			clk.set(t0.Add(tt.after))
			if got, want := sub.mustAdd(c, owner("next")), fmt.Sprintf(tt.want, octet); got.String() != want {
				t.Errorf("ADD %v after X's release got %s, want %s", tt.after, got, want)
			}
		})
	}
}

// testCooldownRequested: an address asked for by name is granted while it cools.
func testCooldownRequested(t *testing.T, f *fixture) {
	withClock(f)
	const fields = `"range":"10.73.0.0/24","reuseCooldown":"1h"`
	x := f.releaseRequested("cool-req", fields, "x", "10.73.0.1")
	got, err := f.add(f.config("cool-req", fields, "IP=10.73.0.1"), owner("y"))
	if err != nil || got[0].Addr != x {
		t.Fatalf("ADD asking for the cooling %s = %v, %v; want it granted", x, got, err)
	}
	if n := len(f.held(f.config("cool-req", fields, ""), 0)); n != 1 {
		t.Errorf("pool holds %d allocations, want 1", n)
	}
}

// testNoCooldown: the control of the cases above. Without reuseCooldown, the same setup hands the
// released address straight back (the cursor never moved), and nothing else changes.
func testNoCooldown(t *testing.T, f *fixture) {
	withClock(f)
	const fields = `"range":"10.74.0.0/24"`
	x := f.releaseRequested("no-cool", fields, "x", "10.74.0.1")
	if got := f.mustAdd(f.config("no-cool", fields, ""), owner("a")); got != x {
		t.Errorf("ADD after releasing %s without a cool-down got %s, want %s straight back", x, got, x)
	}
}

// testCooldownConcurrent: concurrent ADDs and DELs of one pool under a cool-down never hand one
// address to two attachments, and nothing fails while the pool has room. Each caller adds, then
// releases, then adds again, so releases, prunes and claims of cooling addresses interleave.
func testCooldownConcurrent(t *testing.T, f *fixture) {
	clk := withClock(f)
	c := f.config("cool-concurrent", `"range":"10.76.0.0/27","reuseCooldown":"1h"`, "")
	const callers = 12 // 24 claims in a window of 30: late ones take cooling addresses
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for j := range 2 {
				id := fmt.Sprintf("c%d-%d", i, j)
				if _, err := f.add(c, owner(id)); err != nil {
					t.Errorf("ADD %s: %v", id, err)
					return
				}
				mu.Lock()
				clk.set(clk.now().Add(time.Second))
				mu.Unlock()
				if j == 0 {
					if _, err := f.del(c, owner(id)); err != nil {
						t.Errorf("DEL %s: %v", id, err)
					}
				}
			}
		})
	}
	wg.Wait()
	held := f.held(c, 0)
	owners := map[allocator.Owner]bool{}
	for _, al := range held {
		owners[al.Owner] = true
	}
	if len(held) != callers || len(owners) != callers {
		t.Errorf("pool holds %d addresses for %d owners after %d callers each kept one", len(held), len(owners), callers)
	}
}
