package boltstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/ipam"
)

// mustOpen opens a store in a temp dir and, after the test, runs bbolt's consistency check.
func mustOpen(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "netpool.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Check(); err != nil {
			t.Errorf("bbolt consistency check: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s, path
}

func mustConfig(t testing.TB, ipamJSON string) *ipam.Config {
	t.Helper()
	c, err := ipam.Load([]byte(`{"cniVersion":"1.1.0","name":"net1","ipam":`+ipamJSON+`}`), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func owner(i int) allocator.Owner {
	return allocator.Owner{ContainerID: fmt.Sprintf("c%d", i), IfName: "eth0"}
}

func TestRoundRobinAndExhaustionAtCapacity(t *testing.T) {
	s, _ := mustOpen(t)
	a := allocator.New(s)
	ctx := context.Background()
	c := mustConfig(t, `{"range":"10.0.0.0/28","gateway":"10.0.0.1","exclude":["10.0.0.5/32","10.0.0.8/30"]}`)
	capacity := int(c.Ranges[0].Capacity().Int64()) // 14 - gateway - .5 - .8/30 = 8
	if capacity != 8 {
		t.Fatalf("capacity = %d, want 8", capacity)
	}
	want := []string{"10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.6", "10.0.0.7", "10.0.0.12", "10.0.0.13", "10.0.0.14"}
	for i := range capacity {
		got, err := a.Add(ctx, c, owner(i))
		if err != nil {
			t.Fatalf("ADD %d: %v", i, err)
		}
		if got[0].Addr.String() != want[i] {
			t.Errorf("ADD %d = %s, want %s", i, got[0].Addr, want[i])
		}
	}
	if err := a.Status(ctx, c); !errors.Is(err, allocator.ErrPoolExhausted) {
		t.Errorf("STATUS at capacity = %v, want ErrPoolExhausted", err)
	}
	_, err := a.Add(ctx, c, owner(99))
	if !errors.Is(err, allocator.ErrPoolExhausted) || !strings.Contains(err.Error(), "no free address in pool 10.0.0.0/28") {
		t.Fatalf("ADD past capacity = %v", err)
	}
	// Release .4: the next ADD wraps around to it, the only free address.
	if _, err := a.Del(ctx, c, owner(2)); err != nil {
		t.Fatal(err)
	}
	if err := a.Status(ctx, c); err != nil {
		t.Errorf("STATUS after a release = %v", err)
	}
	got, err := a.Add(ctx, c, owner(100))
	if err != nil || got[0].Addr.String() != "10.0.0.4" {
		t.Fatalf("ADD after release = %v %v, want 10.0.0.4", got, err)
	}
}

func TestRoundRobinDoesNotReuseJustReleased(t *testing.T) {
	s, _ := mustOpen(t)
	a := allocator.New(s)
	ctx := context.Background()
	c := mustConfig(t, `{"range":"10.0.0.0/24"}`)
	first, _ := a.Add(ctx, c, owner(1))
	if _, err := a.Del(ctx, c, owner(1)); err != nil {
		t.Fatal(err)
	}
	again, err := a.Add(ctx, c, owner(1))
	if err != nil {
		t.Fatal(err)
	}
	if again[0].Addr == first[0].Addr {
		t.Errorf("a re-created container got its released address %s straight back", first[0].Addr)
	}
}

func TestAddIsIdempotentAndDelRepeatable(t *testing.T) {
	s, _ := mustOpen(t)
	a := allocator.New(s)
	ctx := context.Background()
	c := mustConfig(t, `{"range":"10.0.0.0/24","ipRanges":[{"range":"fd00::/64"}]}`)
	x, err := a.Add(ctx, c, owner(1))
	if err != nil {
		t.Fatal(err)
	}
	y, err := a.Add(ctx, c, owner(1))
	if err != nil {
		t.Fatal(err)
	}
	if len(x) != 2 || x[0].Addr != y[0].Addr || x[1].Addr != y[1].Addr {
		t.Fatalf("second ADD = %v, want %v", y, x)
	}
	if !x[0].Addr.Is4() || !x[1].Addr.Is6() {
		t.Errorf("dual stack gave %s and %s", x[0].Addr, x[1].Addr)
	}
	for range 2 {
		if _, err := a.Del(ctx, c, owner(1)); err != nil {
			t.Fatalf("DEL: %v", err)
		}
	}
	if _, err := a.Del(ctx, c, owner(42)); err != nil {
		t.Fatalf("DEL of something never allocated: %v", err)
	}
}

func TestRequestedAddresses(t *testing.T) {
	s, _ := mustOpen(t)
	a := allocator.New(s)
	ctx := context.Background()
	load := func(ips string) *ipam.Config {
		t.Helper()
		c, err := ipam.Load([]byte(`{"name":"net1","runtimeConfig":{"ips":[`+ips+`]},"ipam":{"range":"10.0.0.0/24","range_end":"10.0.0.100","gateway":"10.0.0.1","exclude":["10.0.0.50"]}}`), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	got, err := a.Add(ctx, load(`"10.0.0.7/24"`), owner(1))
	if err != nil || got[0].Addr.String() != "10.0.0.7" {
		t.Fatalf("static ADD = %v %v", got, err)
	}
	tests := []struct {
		ip      string
		owner   int
		wantErr error
		wantMsg string
	}{
		{`"10.0.0.7"`, 2, allocator.ErrAddressInUse, "10.0.0.7 in pool 10.0.0.0/24 is held by c1/eth0"},
		{`"10.0.0.1"`, 2, allocator.ErrAddressNotAllowed, "10.0.0.1 is the gateway of range 10.0.0.0/24"},
		{`"10.0.0.50"`, 2, allocator.ErrAddressNotAllowed, "10.0.0.50 is excluded from range 10.0.0.0/24"},
		{`"10.0.0.200"`, 2, allocator.ErrAddressNotAllowed, "outside the window 10.0.0.1-10.0.0.100"},
		{`"10.0.0.255"`, 2, allocator.ErrAddressNotAllowed, "network or broadcast address"},
		{`"10.0.0.8"`, 1, allocator.ErrAttachmentConflict, "c1/eth0 holds 10.0.0.7 in pool 10.0.0.0/24, not the requested 10.0.0.8"},
	}
	for _, tt := range tests {
		_, err := a.Add(ctx, load(tt.ip), owner(tt.owner))
		if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("request %s: err = %v, want %v containing %q", tt.ip, err, tt.wantErr, tt.wantMsg)
		}
	}
	// None of the refused requests changed state: only c1 holds anything.
	n := 0
	err = s.View(ctx, func(ctx context.Context, tx allocator.Txn) error {
		return tx.ForEach(ctx, "10.0.0.0/24", func(al allocator.Allocation) error { n++; return nil })
	})
	if err != nil || n != 1 {
		t.Errorf("allocations after refused requests = %d (%v), want 1", n, err)
	}
}

func TestOverlappingRangesAndNetworkNames(t *testing.T) {
	s, _ := mustOpen(t)
	a := allocator.New(s)
	ctx := context.Background()
	wide := mustConfig(t, `{"range":"10.0.0.0/29"}`)
	narrow := mustConfig(t, `{"range":"10.0.0.0/30"}`)
	other := mustConfig(t, `{"range":"10.0.0.0/30","network_name":"blue"}`)
	noOverlap := mustConfig(t, `{"range":"10.0.0.0/30","network_name":"green","enable_overlapping_ranges":false}`)

	seen := map[netip.Addr]int{}
	for i := range 3 {
		for j, c := range []*ipam.Config{wide, narrow} {
			got, err := a.Add(ctx, c, owner(10*j+i))
			if err != nil {
				if j == 1 && errors.Is(err, allocator.ErrPoolExhausted) {
					continue
				}
				t.Fatal(err)
			}
			seen[got[0].Addr]++
		}
	}
	for addr, n := range seen {
		if n > 1 {
			t.Errorf("%s handed out %d times across overlapping pools of one network", addr, n)
		}
	}
	// Another network name may reuse the addresses; so may a pool with overlapping ranges off.
	for _, c := range []*ipam.Config{other, noOverlap} {
		got, err := a.Add(ctx, c, owner(100))
		if err != nil || got[0].Addr.String() != "10.0.0.1" {
			t.Errorf("%s: ADD = %v %v, want 10.0.0.1", c.NetworkName, got, err)
		}
	}
}

func TestGCOnlyTouchesThisNetwork(t *testing.T) {
	s, _ := mustOpen(t)
	a := allocator.New(s)
	ctx := context.Background()
	n1 := mustConfig(t, `{"range":"10.0.0.0/24"}`)
	n2, err := ipam.Load([]byte(`{"name":"net2","ipam":{"range":"10.0.0.0/24"}}`), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := a.Add(ctx, n1, owner(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Add(ctx, n2, owner(9)); err != nil {
		t.Fatal(err)
	}
	released, err := a.GC(ctx, n1, []allocator.Owner{owner(1), owner(3)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range released {
		got = append(got, r.Owner.ContainerID)
	}
	if fmt.Sprint(got) != "[c0 c2]" {
		t.Errorf("GC released %v, want [c0 c2] (net2's c9 and the valid c1, c3 kept)", got)
	}
	if err := a.Check(ctx, n2, owner(9), nil); err != nil {
		t.Errorf("net2's allocation after net1's GC: %v", err)
	}
}

func TestCheck(t *testing.T) {
	s, _ := mustOpen(t)
	a := allocator.New(s)
	ctx := context.Background()
	c := mustConfig(t, `{"range":"10.0.0.0/24"}`)
	got, err := a.Add(ctx, c, owner(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Check(ctx, c, owner(1), []netip.Addr{got[0].Addr}); err != nil {
		t.Errorf("CHECK of a good attachment: %v", err)
	}
	err = a.Check(ctx, c, owner(1), []netip.Addr{netip.MustParseAddr("10.0.0.99")})
	if !errors.Is(err, allocator.ErrCheckFailed) || !strings.Contains(err.Error(), "10.0.0.99 is in the result of c1/eth0 but not allocated to it") {
		t.Errorf("CHECK with a wrong address = %v", err)
	}
	err = a.Check(ctx, c, owner(2), nil)
	if !errors.Is(err, allocator.ErrCheckFailed) || !strings.Contains(err.Error(), "c2/eth0 holds no address in pool 10.0.0.0/24") {
		t.Errorf("CHECK of an unknown attachment = %v", err)
	}
}

// TestRunsMatchModel drives random claims and releases and compares the store against a plain set:
// the runs stay maximal, and ClaimNext returns the first free allowed address after the cursor.
func TestRunsMatchModel(t *testing.T) {
	s, _ := mustOpen(t)
	a := allocator.New(s)
	ctx := context.Background()
	c := mustConfig(t, `{"range":"10.0.0.0/26","exclude":["10.0.0.20/30"]}`)
	r := c.Ranges[0]
	rng := rand.New(rand.NewPCG(1, 2))
	held := map[int]netip.Addr{}
	var cursor netip.Addr
	for step := range 3000 {
		i := rng.IntN(80)
		if addr, ok := held[i]; ok && rng.IntN(2) == 0 {
			if _, err := a.Del(ctx, c, owner(i)); err != nil {
				t.Fatal(err)
			}
			delete(held, i)
			_ = addr
			continue
		}
		if _, ok := held[i]; ok {
			continue
		}
		want := modelNext(r, held, cursor)
		got, err := a.Add(ctx, c, owner(i))
		if !want.IsValid() {
			if !errors.Is(err, allocator.ErrPoolExhausted) {
				t.Fatalf("step %d: ADD = %v %v, want exhausted", step, got, err)
			}
			continue
		}
		if err != nil || got[0].Addr != want {
			t.Fatalf("step %d: ADD = %v %v, want %s", step, got, err, want)
		}
		held[i], cursor = want, want
	}
	assertRunsMaximal(t, s, "10.0.0.0/26", held)
}

func modelNext(r ipam.Range, held map[int]netip.Addr, cursor netip.Addr) netip.Addr {
	taken := map[netip.Addr]bool{}
	for _, a := range held {
		taken[a] = true
	}
	start := r.Start
	if cursor.IsValid() {
		start = cursor.Next()
	}
	for _, from := range []netip.Addr{start, r.Start} {
		for a := from; a.Compare(r.End) <= 0; a = a.Next() {
			if r.Allowed(a) == nil && !taken[a] {
				return a
			}
		}
	}
	return netip.Addr{}
}

func assertRunsMaximal(t *testing.T, s *Store, pool string, held map[int]netip.Addr) {
	t.Helper()
	taken := map[netip.Addr]bool{}
	for _, a := range held {
		taken[a] = true
	}
	err := s.View(context.Background(), func(_ context.Context, tx allocator.Txn) error {
		b := tx.(*txn).tx.Bucket(bucketPools).Bucket([]byte(pool)).Bucket(bucketUsed)
		var prevLast netip.Addr
		n := 0
		return b.ForEach(func(k, v []byte) error {
			first, last := addr(k), addr(v)
			if prevLast.IsValid() && prevLast.Next().Compare(first) >= 0 {
				return fmt.Errorf("runs ending %s and starting %s touch or overlap", prevLast, first)
			}
			for x := first; x.Compare(last) <= 0; x = x.Next() {
				if !taken[x] {
					return fmt.Errorf("run %s-%s holds free %s", first, last, x)
				}
				n++
			}
			prevLast = last
			if n > len(taken) {
				return fmt.Errorf("runs hold more than the %d allocations", len(taken))
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestHugeRangesCostNothingExtra(t *testing.T) {
	s, _ := mustOpen(t)
	a := allocator.New(s)
	ctx := context.Background()
	for _, rng := range []string{`"10.0.0.0/8"`, `"fd00::/48"`, `"fd01::/16"`} {
		c := mustConfig(t, `{"range":`+rng+`}`)
		for i := range 3 {
			if _, err := a.Add(ctx, c, owner(i)); err != nil {
				t.Fatalf("%s: %v", rng, err)
			}
		}
		if err := a.Status(ctx, c); err != nil {
			t.Errorf("%s: STATUS %v", rng, err)
		}
	}
	// The highest part of a /64 is as reachable as the lowest.
	c, err := ipam.Load([]byte(`{"name":"n","runtimeConfig":{"ips":["fd02::ffff:ffff:ffff:fffe"]},"ipam":{"range":"fd02::/64"}}`), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.Add(ctx, c, owner(7)); err != nil || got[0].Addr.String() != "fd02::ffff:ffff:ffff:fffe" {
		t.Errorf("top of a /64 = %v %v", got, err)
	}
}

func TestLockTimeoutIsBusy(t *testing.T) {
	_, path := mustOpen(t)
	start := time.Now()
	_, err := Open(path, 150*time.Millisecond)
	if !errors.Is(err, allocator.ErrStoreBusy) {
		t.Fatalf("second open = %v, want ErrStoreBusy", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("lock wait took %v, want about 150ms", d)
	}
}

func TestCorruptFileIsUnusable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a bbolt file ", 512)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, time.Second)
	if !errors.Is(err, allocator.ErrStoreUnusable) || !strings.Contains(err.Error(), path) {
		t.Fatalf("open of a corrupt file = %v", err)
	}
}

func TestUnwritableDirectoryIsUnusable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(filepath.Join(file, "sub", "x.db"), time.Second)
	if !errors.Is(err, allocator.ErrStoreUnusable) {
		t.Fatalf("open under a file = %v, want ErrStoreUnusable", err)
	}
}
