package boltstore

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/netpool/netpool/allocator"
)

// coolingFixture is a store whose pool "green/10.1.0.0/28" holds 10.1.0.1 and .3 and cools .2,
// released under a one-hour reuse cool-down.
func coolingFixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "netpool.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	a := allocator.New(s).WithClock(func() time.Time { return clock })
	c := mustConfig(t, `{"range":"10.1.0.0/28","network_name":"green","reuseCooldown":"1h"}`)
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		if _, err := a.Add(ctx, c, owner(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Del(ctx, c, owner(2)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

const coolingPool = "green/10.1.0.0/28"

// TestVerifyCoolingBuckets: a store with addresses cooling is consistent, and damage to the
// cool-down's buckets (its two indexes disagreeing, a held address left cooling, a blocked run
// lost) is named.
func TestVerifyCoolingBuckets(t *testing.T) {
	v, err := Verify(t.Context(), coolingFixture(t), time.Second)
	if err != nil || len(v.Findings) != 0 {
		t.Fatalf("a store with a cooling address: %v, findings %v", err, v.Findings)
	}
	tests := []struct {
		name  string
		kind  FindingKind
		text  string
		plant func(tx *bolt.Tx) error
	}{
		{"the address index forgets a cooling address", FindingCoolingIndex, "cools since", func(tx *bolt.Tx) error {
			return poolBucket(tx, coolingPool, bucketCooled).Delete(key(ip("10.1.0.2")))
		}},
		{"the time index forgets a cooling address", FindingCoolingIndex, "cools by the address index only", func(tx *bolt.Tx) error {
			c := poolBucket(tx, coolingPool, bucketCooling)
			k, _ := c.Cursor().First()
			return c.Delete(append([]byte(nil), k...))
		}},
		{"a held address is cooling too", FindingCoolingIndex, "10.1.0.3 is held and cooling at once", func(tx *bolt.Tx) error {
			stampNow := stamp(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
			if err := poolBucket(tx, coolingPool, bucketCooled).Put(key(ip("10.1.0.3")), stampNow); err != nil {
				return err
			}
			return poolBucket(tx, coolingPool, bucketCooling).Put(append(stampNow, key(ip("10.1.0.3"))...), nil)
		}},
		{"the blocked runs lose the cooling address", FindingAllocationNotInRun, "10.1.0.2", func(tx *bolt.Tx) error {
			b := poolBucket(tx, coolingPool, bucketBlocked)
			if err := b.Delete(key(ip("10.1.0.1"))); err != nil {
				return err
			}
			if err := b.Put(key(ip("10.1.0.1")), key(ip("10.1.0.1"))); err != nil {
				return err
			}
			return b.Put(key(ip("10.1.0.3")), key(ip("10.1.0.3")))
		}},
		{"a pool keeps only some of its cool-down buckets", FindingLayout, "some but not all of its cool-down buckets", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketPools).Bucket([]byte(coolingPool)).DeleteBucket(bucketCooled)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := coolingFixture(t)
			plant(t, path, tt.plant)
			v, err := Verify(t.Context(), path, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range v.Findings {
				if f.Kind == tt.kind && strings.Contains(f.Text, tt.text) {
					return
				}
			}
			t.Fatalf("no %s finding containing %q among %v", tt.kind, tt.text, v.Findings)
		})
	}
}
