package allocator_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/ipam"
)

var ctx = context.Background()

// load returns the config of network "net1" with the given ipam members and CNI_ARGS.
func load(t *testing.T, ipamMembers, cniArgs string) *ipam.Config {
	t.Helper()
	c, err := ipam.Load([]byte(`{"cniVersion":"1.1.0","name":"net1","ipam":{"type":"netpool","datastore":"bbolt","bbolt":{"path":"/unused.db"},`+ipamMembers+`}}`), cniArgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func own(id string) allocator.Owner { return allocator.Owner{ContainerID: id, IfName: "eth0"} }

const dual = `"ipRanges":[{"range":"10.1.0.0/29"},{"range":"fd01::/125"}],"network_name":"blue"`

func TestPools(t *testing.T) {
	c := load(t, dual, "")
	pools := allocator.Pools(c)
	if len(pools) != 2 || pools[0].Key != c.PoolKey(0) || pools[1].Key != c.PoolKey(1) ||
		pools[0].Range.Subnet.String() != "10.1.0.0/29" || pools[1].Range.Subnet.String() != "fd01::/125" {
		t.Fatalf("Pools = %+v, want one per range in range order", pools)
	}
	for _, p := range pools {
		if p.Scope != allocator.OverlapScope("blue") {
			t.Errorf("pool %s scope = %q, want the network's %q", p.Key, p.Scope, allocator.OverlapScope("blue"))
		}
	}
	off := load(t, `"range":"10.1.0.0/29","network_name":"blue","enable_overlapping_ranges":false`, "")
	if p := allocator.Pools(off)[0]; p.Scope != "" {
		t.Errorf("overlapping ranges off: scope = %q, want none", p.Scope)
	}
	if allocator.OverlapScope("a") == allocator.OverlapScope("b") {
		t.Error("two network names share an overlap scope")
	}
}

func TestAdd(t *testing.T) {
	t.Run("one allocation per range, in range order, recorded as the config says", func(t *testing.T) {
		a := allocator.New(newMemStore())
		c := load(t, dual, "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=pod;K8S_POD_UID=uid")
		before := time.Now()
		got, err := a.Add(ctx, c, own("c1"))
		if err != nil || len(got) != 2 {
			t.Fatalf("Add = %v, %v", got, err)
		}
		for i, al := range got {
			p := allocator.Pools(c)[i]
			if al.Pool != p.Key || !p.Range.Contains(al.Addr) || al.Owner != own("c1") || al.Network != "net1" ||
				al.Scope != p.Scope || al.Pod != c.Pod || al.Pod.Name != "pod" {
				t.Errorf("allocation %d = %+v, want one of pool %s for c1/eth0 of pod ns/pod", i, al, p.Key)
			}
			if al.Created.Location() != time.UTC || al.Created.Before(before.Add(-time.Second)) || al.Created.After(time.Now().Add(time.Second)) {
				t.Errorf("allocation %d created %v, want now in UTC", i, al.Created)
			}
		}
	})
	t.Run("again for the same attachment returns the same addresses", func(t *testing.T) {
		a := allocator.New(newMemStore())
		c := load(t, dual, "")
		first, err := a.Add(ctx, c, own("c1"))
		if err != nil {
			t.Fatal(err)
		}
		again, err := a.Add(ctx, c, own("c1"))
		if err != nil || again[0].Addr != first[0].Addr || again[1].Addr != first[1].Addr {
			t.Errorf("repeated Add = %v, %v; want %v", again, err, first)
		}
	})
	t.Run("a requested address", func(t *testing.T) {
		s := newMemStore()
		a := allocator.New(s)
		got, err := a.Add(ctx, load(t, dual, "IP=10.1.0.5"), own("c1"))
		if err != nil || got[0].Addr.String() != "10.1.0.5" {
			t.Fatalf("Add asking for 10.1.0.5 = %v, %v", got, err)
		}
		if got[1].Addr.Is4() {
			t.Errorf("the other range got %s, want an address of fd01::/125", got[1].Addr)
		}
		// Asked again by the holder: the same allocation. Asked for another: a conflict naming both.
		if again, err := a.Add(ctx, load(t, dual, "IP=10.1.0.5"), own("c1")); err != nil || again[0].Addr != got[0].Addr {
			t.Errorf("repeated Add asking for 10.1.0.5 = %v, %v", again, err)
		}
		_, err = a.Add(ctx, load(t, dual, "IP=10.1.0.6"), own("c1"))
		if !errors.Is(err, allocator.ErrAttachmentConflict) || !strings.Contains(err.Error(), "holds 10.1.0.5") ||
			!strings.Contains(err.Error(), "not the requested 10.1.0.6") || !strings.Contains(err.Error(), "c1/eth0") {
			t.Errorf("Add asking for another address = %v", err)
		}
	})
	t.Run("a requested address the range does not allow is refused before the store is asked", func(t *testing.T) {
		s := newMemStore()
		s.fail = map[string]error{"Claim": errors.New("Claim must not be called")}
		a := allocator.New(s)
		c := load(t, `"range":"10.1.0.0/29","gateway":"10.1.0.1"`, "IP=10.1.0.1")
		_, err := a.Add(ctx, c, own("c1"))
		var cfgErr *ipam.ConfigError
		if !errors.Is(err, allocator.ErrAddressNotAllowed) || !strings.Contains(err.Error(), "requested") ||
			!strings.Contains(err.Error(), "10.1.0.1") || errors.As(err, &cfgErr) {
			t.Errorf("Add asking for the gateway = %v, want ErrAddressNotAllowed naming it", err)
		}
	})
	t.Run("a store error comes back wrapped, and the failed Add leaves nothing", func(t *testing.T) {
		s := newMemStore()
		boom := errors.New("boom")
		s.fail = map[string]error{"Claim": boom}
		a := allocator.New(s)
		_, err := a.Add(ctx, load(t, dual, "IP=fd01::3"), own("c1"))
		if !errors.Is(err, boom) {
			t.Fatalf("Add with a failing Claim = %v, want boom", err)
		}
		s.fail = nil
		if _, err := a.Del(ctx, load(t, dual, ""), own("c1")); err != nil {
			t.Fatal(err)
		}
		for _, p := range allocator.Pools(load(t, dual, "")) {
			if n := len(s.state.pools[p.Key]); n != 0 {
				t.Errorf("pool %s holds %d allocations after the failed Add", p.Key, n)
			}
		}
	})
	t.Run("exhaustion of any range fails the Add", func(t *testing.T) {
		a := allocator.New(newMemStore())
		c := load(t, `"ipRanges":[{"range":"10.1.0.0/24"},{"range":"10.2.0.0/30"}]`, "")
		for _, id := range []string{"c1", "c2"} {
			if _, err := a.Add(ctx, c, own(id)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := a.Add(ctx, c, own("c3")); !errors.Is(err, allocator.ErrPoolExhausted) {
			t.Errorf("Add with the second range full = %v, want ErrPoolExhausted", err)
		}
	})
}

func TestDel(t *testing.T) {
	s := newMemStore()
	a := allocator.New(s)
	c := load(t, dual, "")
	added, err := a.Add(ctx, c, own("c1"))
	if err != nil {
		t.Fatal(err)
	}
	released, err := a.Del(ctx, c, own("c1"))
	if err != nil || len(released) != 2 || released[0].Addr != added[0].Addr || released[1].Addr != added[1].Addr {
		t.Fatalf("Del = %v, %v; want %v", released, err, added)
	}
	if released, err := a.Del(ctx, c, own("c1")); err != nil || len(released) != 0 {
		t.Errorf("repeated Del = %v, %v; want nothing released, no error", released, err)
	}
	boom := errors.New("boom")
	s.fail = map[string]error{"Release": boom}
	if _, err := a.Del(ctx, c, own("c1")); !errors.Is(err, boom) {
		t.Errorf("Del with a failing Release = %v, want boom", err)
	}
}

func TestCheck(t *testing.T) {
	s := newMemStore()
	a := allocator.New(s)
	c := load(t, dual, "")
	added, err := a.Add(ctx, c, own("c1"))
	if err != nil {
		t.Fatal(err)
	}
	have := []netip.Addr{added[0].Addr, added[1].Addr, netip.MustParseAddr("192.0.2.1")} // the last is no range's
	if err := a.Check(ctx, c, own("c1"), have); err != nil {
		t.Errorf("Check of what c1 holds = %v", err)
	}
	stray := netip.MustParseAddr("10.1.0.6")
	if stray == added[0].Addr {
		stray = netip.MustParseAddr("10.1.0.5")
	}
	err = a.Check(ctx, c, own("c1"), append(have, stray))
	if !errors.Is(err, allocator.ErrCheckFailed) || !strings.Contains(err.Error(), stray.String()+" is in the result of c1/eth0 but not allocated to it") {
		t.Errorf("Check with an address c1 does not hold = %v", err)
	}
	// Nothing held: one error per range, and the result's addresses named too.
	err = a.Check(ctx, c, own("c2"), have[:1])
	for _, want := range []string{"holds no address in pool " + c.PoolKey(0), "holds no address in pool " + c.PoolKey(1), added[0].Addr.String() + " is in the result"} {
		if !errors.Is(err, allocator.ErrCheckFailed) || !strings.Contains(err.Error(), want) {
			t.Errorf("Check of c2, which holds nothing = %v, want it to name %q", err, want)
		}
	}
	boom := errors.New("boom")
	s.fail = map[string]error{"Get": boom}
	if err := a.Check(ctx, c, own("c1"), have); !errors.Is(err, boom) || errors.Is(err, allocator.ErrCheckFailed) {
		t.Errorf("Check with a failing Get = %v, want boom and no verdict", err)
	}
}

func TestGC(t *testing.T) {
	s := newMemStore()
	a := allocator.New(s)
	mine := load(t, `"range":"10.1.0.0/28"`, "")
	theirs, err := ipam.Load([]byte(`{"cniVersion":"1.1.0","name":"net2","ipam":{"type":"netpool","datastore":"bbolt","bbolt":{"path":"/unused.db"},"range":"10.1.0.0/28"}}`), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"keep", "stale"} {
		if _, err := a.Add(ctx, mine, own(id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Add(ctx, theirs, own("net2-stale")); err != nil {
		t.Fatal(err)
	}
	released, err := a.GC(ctx, mine, []allocator.Owner{own("keep")})
	if err != nil || len(released) != 1 || released[0].Owner != own("stale") {
		t.Fatalf("GC = %v, %v; want only stale released", released, err)
	}
	if again, err := a.GC(ctx, mine, []allocator.Owner{own("keep")}); err != nil || len(again) != 0 {
		t.Errorf("repeated GC = %v, %v", again, err)
	}
	left := map[allocator.Owner]bool{}
	for _, al := range s.state.pools[mine.PoolKey(0)] {
		left[al.Owner] = true
	}
	if len(left) != 2 || !left[own("keep")] || !left[own("net2-stale")] {
		t.Errorf("after GC the pool holds %v, want keep and net2's allocation", left)
	}
	boom := errors.New("boom")
	s.fail = map[string]error{"ForEach": boom}
	if _, err := a.GC(ctx, mine, nil); !errors.Is(err, boom) {
		t.Errorf("GC with a failing ForEach = %v, want boom", err)
	}
}

func TestStatus(t *testing.T) {
	s := newMemStore()
	a := allocator.New(s)
	c := load(t, `"ipRanges":[{"range":"10.1.0.0/24"},{"range":"10.2.0.0/30","range_start":"10.2.0.2"}]`, "")
	if err := a.Status(ctx, c); err != nil {
		t.Fatalf("Status of empty pools = %v", err)
	}
	if _, err := a.Add(ctx, c, own("c1")); err != nil {
		t.Fatal(err)
	}
	err := a.Status(ctx, c)
	if !errors.Is(err, allocator.ErrPoolExhausted) || !strings.Contains(err.Error(), "no free address in pool "+c.PoolKey(1)) ||
		!strings.Contains(err.Error(), "window 10.2.0.2-10.2.0.2") {
		t.Errorf("Status with the second range full = %v, want ErrPoolExhausted naming its pool and window", err)
	}
	boom := errors.New("boom")
	s.fail = map[string]error{"HasFree": boom}
	if err := a.Status(ctx, c); !errors.Is(err, boom) {
		t.Errorf("Status with a failing HasFree = %v, want boom", err)
	}
}

func TestCanceledContext(t *testing.T) {
	a := allocator.New(newMemStore())
	done, cancel := context.WithCancel(ctx)
	cancel()
	c := load(t, dual, "")
	if _, err := a.Add(done, c, own("c1")); !errors.Is(err, context.Canceled) {
		t.Errorf("Add with a canceled context = %v", err)
	}
}
