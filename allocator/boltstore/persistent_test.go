package boltstore

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/ipam"
)

// TestStickyPodNames holds the embedded store to the sticky rule by pod name: with statefulSets:
// Sticky, the same pod name gets the same address after DEL and re-ADD with another container ID,
// GC with the runtime's valid list keeps it, a requested address wins and is remembered, names of
// no ordinal and configs without the setting are unaffected, and only a release of the address
// frees it. netpoolctl check finds nothing wrong with the file at the end.
func TestStickyPodNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "netpool.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a := allocator.New(s)
	ctx := context.Background()
	conf := func(t *testing.T, extra, pod string) *ipam.Config {
		t.Helper()
		c, err := ipam.Load([]byte(`{"cniVersion":"1.1.0","name":"net1","ipam":{"range":"10.0.0.0/24"`+extra+`}}`),
			"K8S_POD_NAMESPACE=apps;K8S_POD_NAME="+pod, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const sticky = `,"statefulSets":"Sticky"`
	add := func(t *testing.T, c *ipam.Config, id string) netip.Addr {
		t.Helper()
		got, err := a.Add(ctx, c, allocator.Owner{ContainerID: id, IfName: "eth0"})
		if err != nil {
			t.Fatalf("ADD %s: %v", id, err)
		}
		return got[0].Addr
	}
	del := func(t *testing.T, c *ipam.Config, id string) {
		t.Helper()
		if _, err := a.Del(ctx, c, allocator.Owner{ContainerID: id, IfName: "eth0"}); err != nil {
			t.Fatalf("DEL %s: %v", id, err)
		}
	}

	db0, db1 := conf(t, sticky, "db-0"), conf(t, sticky, "db-1")
	x0, x1 := add(t, db0, "c-db-0"), add(t, db1, "c-db-1")
	if x0 == x1 {
		t.Fatalf("db-0 and db-1 both got %s", x0)
	}
	del(t, db1, "c-db-1")
	// Other ADDs between: round-robin would hand x1 out next were it free.
	plain := add(t, conf(t, sticky, "web-7d4b9c-x2k4p"), "c-web")
	if got := add(t, db1, "c-db-1-again"); got != x1 {
		t.Fatalf("db-1 re-added with another container got %s, want its %s", got, x1)
	}
	if plain == x1 {
		t.Fatalf("a pod of no ordinal got db-1's held %s", x1)
	}

	t.Run("GC with the runtime's valid list keeps it", func(t *testing.T) {
		released, err := a.GC(ctx, db1, []allocator.Owner{{ContainerID: "c-db-0", IfName: "eth0"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range released {
			if r.Addr == x1 || r.Addr == x0 {
				t.Fatalf("GC released the sticky %s", r.Addr)
			}
		}
		if got := add(t, db1, "c-db-1-third"); got != x1 {
			t.Fatalf("after GC db-1 got %s, want %s", got, x1)
		}
	})

	t.Run("without the setting a name does not stick", func(t *testing.T) {
		c := conf(t, "", "cache-0")
		first := add(t, c, "c-cache-0")
		del(t, c, "c-cache-0")
		if got := add(t, c, "c-cache-0-again"); got == first {
			t.Fatalf("cache-0 without statefulSets got %s again; round-robin should have moved on", got)
		}
	})

	t.Run("a requested address wins and is remembered", func(t *testing.T) {
		req := func(ip string) *ipam.Config {
			c := conf(t, sticky, "db-2")
			c.Requested = []netip.Addr{netip.MustParseAddr(ip)}
			return c
		}
		if got := add(t, req("10.0.0.200"), "c-db-2"); got != netip.MustParseAddr("10.0.0.200") {
			t.Fatalf("db-2 requesting 10.0.0.200 got %s", got)
		}
		del(t, req("10.0.0.200"), "c-db-2")
		if got := add(t, conf(t, sticky, "db-2"), "c-db-2-b"); got != netip.MustParseAddr("10.0.0.200") {
			t.Fatalf("db-2 without ips got %s, want the requested 10.0.0.200", got)
		}
		if got := add(t, req("10.0.0.201"), "c-db-2-c"); got != netip.MustParseAddr("10.0.0.201") {
			t.Fatalf("db-2 requesting 10.0.0.201 got %s", got)
		}
		// 10.0.0.200 is free again: requesting it for another pod succeeds.
		other := conf(t, "", "other")
		other.Requested = []netip.Addr{netip.MustParseAddr("10.0.0.200")}
		if got := add(t, other, "c-other"); got != netip.MustParseAddr("10.0.0.200") {
			t.Fatalf("10.0.0.200 after db-2 moved: %s", got)
		}
	})

	t.Run("releasing the address frees the name", func(t *testing.T) {
		// What netpoolctl --db release --force does: Get and Release the holder.
		err := s.Update(ctx, func(ctx context.Context, tx allocator.Txn) error {
			p := allocator.Pools(db1)[0]
			_, ok, err := tx.Release(ctx, p, allocator.Owner{ContainerID: "c-db-1-third", IfName: "eth0"})
			if err == nil && !ok {
				t.Error("the holder of db-1's address holds nothing")
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		del(t, db1, "c-db-1-third")
		if got := add(t, db1, "c-db-1-fourth"); got == x1 {
			t.Fatalf("after the release db-1 got %s again; round-robin should have moved on", got)
		}
	})

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	v, err := Verify(t.Context(), path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Findings) != 0 {
		t.Fatalf("netpoolctl check of the file: %v", v.Findings)
	}
}
