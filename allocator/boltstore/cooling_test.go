package boltstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/netpool/netpool/allocator"
)

// TestCoolingBucketsStayConsistent churns a small pool with random ADDs and DELs, moving the clock
// and turning the cool-down off and on between calls, and after every call checks the cool-down's
// buckets against the allocations: blocked is exactly used plus the cooling addresses, the two
// cooling indexes agree, and no held address is cooling. A stale blocked run would hide a free
// address for ever; a stale cooling entry would cool a held one.
func TestCoolingBucketsStayConsistent(t *testing.T) {
	s, _ := mustOpen(t)
	clock := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	a := allocator.New(s).WithClock(func() time.Time { return clock })
	ctx := context.Background()
	cool := mustConfig(t, `{"range":"10.0.0.0/27","exclude":["10.0.0.9/32"],"reuseCooldown":"10m"}`)
	plain := mustConfig(t, `{"range":"10.0.0.0/27","exclude":["10.0.0.9/32"]}`)
	key := allocator.Pools(cool)[0].Key
	rng := rand.New(rand.NewPCG(7, 11))
	held := map[int]bool{}
	for step := range 2000 {
		clock = clock.Add(time.Duration(rng.IntN(120)) * time.Second)
		c := cool
		if rng.IntN(10) == 0 {
			c = plain
		}
		id := rng.IntN(40)
		if held[id] {
			if _, err := a.Del(ctx, c, owner(id)); err != nil {
				t.Fatalf("step %d: DEL %d: %v", step, id, err)
			}
			delete(held, id)
		} else {
			_, err := a.Add(ctx, c, owner(id))
			switch {
			case errors.Is(err, allocator.ErrPoolExhausted):
				if len(held) < 29 {
					t.Fatalf("step %d: exhausted with %d of 29 held", step, len(held))
				}
			case err != nil:
				t.Fatalf("step %d: ADD %d: %v", step, id, err)
			default:
				held[id] = true
			}
		}
		if err := s.db.View(func(tx *bolt.Tx) error { return checkCooling(tx, key) }); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}

// checkCooling checks pool key's cool-down buckets against its allocations.
func checkCooling(tx *bolt.Tx, key string) error {
	root := tx.Bucket(bucketPools).Bucket([]byte(key))
	pb := poolBuckets{root: root, alloc: root.Bucket(bucketAlloc), used: root.Bucket(bucketUsed)}
	c, err := openCooling(pb, false)
	if err != nil || !c.tracked() {
		return err
	}
	members := func(b *bolt.Bucket) map[netip.Addr]bool {
		out := map[netip.Addr]bool{}
		_ = b.ForEach(func(k, v []byte) error {
			for a := addr(k); a.IsValid() && a.Compare(addr(v)) <= 0; a = a.Next() {
				out[a] = true
			}
			return nil
		})
		return out
	}
	used, blocked := members(pb.used), members(c.blocked)
	cooling := map[netip.Addr]bool{}
	err = c.byTime.ForEach(func(k, _ []byte) error {
		a := addr(k[8:])
		if at := c.byAddr.Get(k[8:]); at == nil || string(at) != string(k[:8]) {
			return errors.New("cooling index entry " + a.String() + " has no matching cooled entry")
		}
		if pb.alloc.Get(k[8:]) != nil {
			return errors.New("held address " + a.String() + " is cooling")
		}
		cooling[a] = true
		return nil
	})
	if err != nil {
		return err
	}
	if n := c.byAddr.Stats().KeyN; n != len(cooling) {
		return errors.New("the two cooling indexes differ in size")
	}
	for a := range blocked {
		if !used[a] && !cooling[a] {
			return errors.New("blocked holds " + a.String() + ", neither held nor cooling")
		}
	}
	for a := range used {
		if !blocked[a] {
			return errors.New("held " + a.String() + " is not blocked")
		}
	}
	for a := range cooling {
		if !blocked[a] {
			return errors.New("cooling " + a.String() + " is not blocked")
		}
	}
	return nil
}

// BenchmarkAddDel is one ADD and one DEL in process (two fsynced transactions), in an empty /24
// and /8, without and with a cool-down. With one, every release cools, so the /24 soon has
// hundreds of cooling addresses to search past (and then only cooling ones); the /8 shows the
// range's size costs nothing. It reports bbolt's page writes and cursors per ADD+DEL too.
func BenchmarkAddDel(b *testing.B) {
	for _, tt := range []struct{ name, conf string }{
		{"/24", `{"range":"10.0.0.0/24"}`},
		{"/24 cool-down", `{"range":"10.0.0.0/24","reuseCooldown":"1h"}`},
		{"/8", `{"range":"10.0.0.0/8"}`},
		{"/8 cool-down", `{"range":"10.0.0.0/8","reuseCooldown":"1h"}`},
	} {
		b.Run(tt.name, func(b *testing.B) {
			s, err := Open(b.TempDir()+"/netpool.db", time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Close() }() // benchmark only
			a := allocator.New(s)
			c := mustConfig(b, tt.conf)
			ctx := context.Background()
			before := s.db.Stats()
			n := 0
			for i := 0; b.Loop(); i++ {
				n++
				if _, err := a.Add(ctx, c, owner(i)); err != nil {
					b.Fatal(err)
				}
				if _, err := a.Del(ctx, c, owner(i)); err != nil {
					b.Fatal(err)
				}
			}
			// Page writes and cursors are what a transaction's cost is made of, without the
			// fsyncs' noise: a pool without a cool-down must show the same figures as before.
			after := s.db.Stats()
			d := after.Sub(&before)
			b.ReportMetric(float64(d.TxStats.GetWrite())/float64(n), "pagewrites/op")
			b.ReportMetric(float64(d.TxStats.GetCursorCount())/float64(n), "cursors/op")
		})
	}
}

// TestCorruptCoolingIsUnusable: a damaged cool-down bucket (a key of the wrong size, blocked runs
// without their index) fails the call with ErrStoreUnusable naming it, and changes nothing.
func TestCorruptCoolingIsUnusable(t *testing.T) {
	for _, tt := range []struct {
		name   string
		damage func(root *bolt.Bucket) error
		want   string
	}{
		{"a cooling key of the wrong size", func(root *bolt.Bucket) error {
			return root.Bucket(bucketCooling).Put([]byte("short"), nil)
		}, "a cooling entry has a 5-byte key"},
		{"blocked runs without the cooling index", func(root *bolt.Bucket) error {
			return root.DeleteBucket(bucketCooling)
		}, "a pool has blocked runs but no cooling index"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := mustOpen(t)
			a := allocator.New(s)
			ctx := context.Background()
			c := mustConfig(t, `{"range":"10.0.0.0/24","reuseCooldown":"1h"}`)
			if _, err := a.Add(ctx, c, owner(1)); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Del(ctx, c, owner(1)); err != nil {
				t.Fatal(err)
			}
			key := allocator.Pools(c)[0].Key
			if err := s.db.Update(func(tx *bolt.Tx) error { return tt.damage(tx.Bucket(bucketPools).Bucket([]byte(key))) }); err != nil {
				t.Fatal(err)
			}
			_, err := a.Add(ctx, c, owner(2))
			if !errors.Is(err, allocator.ErrStoreUnusable) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ADD over the damaged bucket = %v, want ErrStoreUnusable containing %q", err, tt.want)
			}
			held := 0
			if err := s.View(ctx, func(ctx context.Context, tx allocator.Txn) error {
				return tx.ForEach(ctx, key, func(allocator.Allocation) error { held++; return nil })
			}); err != nil || held != 0 {
				t.Fatalf("after the refused ADD the pool holds %d (%v), want 0", held, err)
			}
		})
	}
}
