package process

import (
	"context"
	"net/netip"
	"sync"
	"testing"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/test/harness"
)

// storm is how many plugin processes run at once; the range holds exactly that many addresses.
const storm = 128

var (
	stormFirst = netip.MustParseAddr("10.10.0.1")
	stormLast  = netip.MustParseAddr("10.10.0.128")
)

// stormFixture is a network whose range holds exactly storm addresses, with a lock timeout long
// enough that storm processes queueing on the file lock all get their turn.
func stormFixture(t *testing.T) *fixture {
	return newFixture(t, map[string]any{
		"range":        "10.10.0.0/24",
		"range_start":  stormFirst.String(),
		"range_end":    stormLast.String(),
		"lock_timeout": "60s",
	})
}

// addStorm runs storm concurrent ADDs of distinct containers and returns their addresses by
// container ID, failing the test on any error.
func addStorm(ctx context.Context, t *testing.T, f *fixture, prefix string) map[string]netip.Addr {
	t.Helper()
	var mu sync.Mutex
	got := map[string]netip.Addr{}
	errs := parallel(storm, func(i int) error {
		id := containerID(prefix, i)
		a, err := f.add(ctx, id)
		if err == nil {
			mu.Lock()
			got[id] = a
			mu.Unlock()
		}
		return err
	})
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if len(got) != storm {
		t.Fatalf("%d of %d concurrent ADDs succeeded", len(got), storm)
	}
	return got
}

// assertExhausted asserts that one more ADD fails with the pool-exhausted CNI code.
func assertExhausted(ctx context.Context, t *testing.T, f *fixture) {
	t.Helper()
	a, err := f.add(ctx, "one-too-many")
	if err == nil {
		t.Fatalf("ADD into a full range succeeded with %s, want CNI error %d", a, codePoolExhausted)
	}
	if code := harness.CNIErrorCode(err); code != codePoolExhausted {
		t.Fatalf("ADD into a full range: %v; want CNI error code %d, got %d", err, codePoolExhausted, code)
	}
}

func TestConcurrentAddsGetDistinctAddresses(t *testing.T) {
	ctx := testContext(t)
	f := stormFixture(t)

	got := addStorm(ctx, t, f, "add")
	assertUniqueInWindow(t, got, stormFirst, stormLast)

	held := f.held(ctx)
	if len(held) != storm {
		t.Fatalf("store holds %d allocations after %d ADDs", len(held), storm)
	}
	for _, al := range held {
		if want := got[al.Owner.ContainerID]; al.Addr != want || al.Owner.IfName != "eth0" || al.Network != network {
			t.Errorf("store has %s for %s/%s of network %q; the plugin returned %s to %s/eth0 of %q",
				al.Addr, al.Owner.ContainerID, al.Owner.IfName, al.Network, want, al.Owner.ContainerID, network)
		}
	}
	assertExhausted(ctx, t, f)
}

func TestDelStormReleasesEverything(t *testing.T) {
	ctx := testContext(t)
	f := stormFixture(t)

	// Fill the range in-process, so that only the DELs race.
	s := f.mustOpen()
	alloc, cfg := allocator.New(s), f.config()
	for i := range storm {
		if _, err := alloc.Add(ctx, cfg, allocator.Owner{ContainerID: containerID("old", i), IfName: "eth0"}); err != nil {
			t.Fatalf("prefill %d: %v", i, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	assertExhausted(ctx, t, f)

	errs := parallel(storm, func(i int) error {
		_, err := f.exec(ctx, "DEL", containerID("old", i))
		return err
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("DEL %s: %v", containerID("old", i), err)
		}
	}
	if held := f.held(ctx); len(held) != 0 {
		t.Fatalf("store still holds %d allocations after %d DELs, first %s of %s",
			len(held), storm, held[0].Addr, held[0].Owner.ContainerID)
	}
	// DEL is idempotent: releasing what is gone succeeds.
	if _, err := f.exec(ctx, "DEL", containerID("old", 0)); err != nil {
		t.Errorf("repeated DEL: %v", err)
	}

	// Every address is free again: exactly the range's capacity of new ADDs fits, and no more.
	got := addStorm(ctx, t, f, "new")
	assertUniqueInWindow(t, got, stormFirst, stormLast)
	assertExhausted(ctx, t, f)
}
