package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/netpool/netpool/allocator"
)

// verifyFixture writes a consistent store: pool blue/10.0.0.0/24 holding .1, .2, .4 and .5 (runs
// .1-.2 and .4-.5), and blue/10.0.0.0/16 holding 10.0.200.1, both in overlap scope net:blue.
func verifyFixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "netpool.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a := allocator.New(s)
	ctx := context.Background()
	small := mustConfig(t, `{"range":"10.0.0.0/24","network_name":"blue"}`)
	wide := mustConfig(t, `{"range":"10.0.0.0/16","range_start":"10.0.200.1","range_end":"10.0.200.9","network_name":"blue"}`)
	for i := 1; i <= 5; i++ {
		if _, err := a.Add(ctx, small, owner(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Del(ctx, small, owner(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Add(ctx, wide, owner(10)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

const (
	smallPool = "blue/10.0.0.0/24"
	widePool  = "blue/10.0.0.0/16"
)

// plant changes the fixture's buckets directly, as damage or a buggy writer would.
func plant(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func poolBucket(tx *bolt.Tx, pool string, name []byte) *bolt.Bucket {
	return tx.Bucket(bucketPools).Bucket([]byte(pool)).Bucket(name)
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func recordOf(t *testing.T, o allocator.Owner, scope string) []byte {
	t.Helper()
	v, err := encodeRecord(&allocator.Allocation{Owner: o, Network: "net1", Scope: scope, Created: time.Unix(0, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// holdFully records a in pool with every index: the record, the owner entry and a used run.
func holdFully(t *testing.T, tx *bolt.Tx, pool string, a netip.Addr, o allocator.Owner, scope string) error {
	if err := poolBucket(tx, pool, bucketAlloc).Put(key(a), recordOf(t, o, scope)); err != nil {
		return err
	}
	if err := (runs{poolBucket(tx, pool, bucketUsed)}).add(a); err != nil {
		return err
	}
	return tx.Bucket(bucketOwners).Put(ownerKey(pool, o), key(a))
}

func TestVerifyConsistentStore(t *testing.T) {
	path := verifyFixture(t)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := Verify(t.Context(), path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Findings) != 0 || v.Pools != 2 || v.Allocations != 5 {
		t.Fatalf("consistent store: %d pools, %d allocations, findings %v; want 2, 5, none", v.Pools, v.Allocations, v.Findings)
	}
	after, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("Verify changed the file (%v)", err)
	}
}

func TestVerifyFindsEachPlantedInconsistency(t *testing.T) {
	tests := []struct {
		kind  FindingKind
		text  string
		plant func(t *testing.T, tx *bolt.Tx) error
		file  func(t *testing.T, path string)
	}{
		{kind: FindingLayout, text: "pool blue/10.0.0.0/24 lacks one of its buckets", plant: func(_ *testing.T, tx *bolt.Tx) error {
			return tx.Bucket(bucketPools).Bucket([]byte(smallPool)).DeleteBucket(bucketMeta)
		}},
		{kind: FindingLayout, text: `the top-level bucket "owners" is missing`, plant: func(_ *testing.T, tx *bolt.Tx) error {
			return tx.DeleteBucket(bucketOwners)
		}},
		{kind: FindingCorruptRecord, text: "the record of 10.0.0.2 does not decode", plant: func(_ *testing.T, tx *bolt.Tx) error {
			return poolBucket(tx, smallPool, bucketAlloc).Put(key(ip("10.0.0.2")), []byte("{not json"))
		}},
		{kind: FindingOutsideSubnet, text: "pool blue/10.0.0.0/24 holds 192.168.0.1, outside its subnet 10.0.0.0/24", plant: func(t *testing.T, tx *bolt.Tx) error {
			return holdFully(t, tx, smallPool, ip("192.168.0.1"), owner(20), "")
		}},
		{kind: FindingOwnerIndexMissing, text: "10.0.0.1 is held by c1/eth0, which the owners index does not list", plant: func(_ *testing.T, tx *bolt.Tx) error {
			return tx.Bucket(bucketOwners).Delete(ownerKey(smallPool, owner(1)))
		}},
		{kind: FindingOwnerIndexDangling, text: "ghost/eth0 points at 10.0.0.3, which pool blue/10.0.0.0/24 does not hold", plant: func(_ *testing.T, tx *bolt.Tx) error {
			return tx.Bucket(bucketOwners).Put(ownerKey(smallPool, allocator.Owner{ContainerID: "ghost", IfName: "eth0"}), key(ip("10.0.0.3")))
		}},
		{kind: FindingOwnerIndexDangling, text: "c1/eth0 points at 10.0.0.2, which pool blue/10.0.0.0/24 records as held by c2/eth0", plant: func(_ *testing.T, tx *bolt.Tx) error {
			return tx.Bucket(bucketOwners).Put(ownerKey(smallPool, owner(1)), key(ip("10.0.0.2")))
		}},
		{kind: FindingRunMalformed, text: "is not a run of addresses", plant: func(_ *testing.T, tx *bolt.Tx) error {
			return poolBucket(tx, smallPool, bucketUsed).Put(key(ip("10.0.0.200")), key(ip("10.0.0.100")))
		}},
		{kind: FindingRunsNotMaximal, text: "used runs ending at 10.0.0.1 and starting at 10.0.0.2 touch", plant: func(_ *testing.T, tx *bolt.Tx) error {
			used := poolBucket(tx, smallPool, bucketUsed)
			if err := used.Put(key(ip("10.0.0.1")), key(ip("10.0.0.1"))); err != nil {
				return err
			}
			return used.Put(key(ip("10.0.0.2")), key(ip("10.0.0.2")))
		}},
		{kind: FindingRunsNotMaximal, text: "used run 10.0.0.2-10.0.0.2 overlaps the run before it, which ends at 10.0.0.2", plant: func(_ *testing.T, tx *bolt.Tx) error {
			return poolBucket(tx, smallPool, bucketUsed).Put(key(ip("10.0.0.2")), key(ip("10.0.0.2")))
		}},
		{kind: FindingRunHoldsFree, text: "used run 10.0.0.50-10.0.0.50 covers 10.0.0.50, which no allocation holds", plant: func(_ *testing.T, tx *bolt.Tx) error {
			return poolBucket(tx, smallPool, bucketUsed).Put(key(ip("10.0.0.50")), key(ip("10.0.0.50")))
		}},
		{kind: FindingRunHoldsFree, text: `overlap scope "net:blue": used run 10.0.0.1-10.0.0.3 covers 10.0.0.3`, plant: func(_ *testing.T, tx *bolt.Tx) error {
			return tx.Bucket(bucketScopes).Bucket([]byte("net:blue")).Put(key(ip("10.0.0.1")), key(ip("10.0.0.3")))
		}},
		{kind: FindingAllocationNotInRun, text: "pool blue/10.0.0.0/24: 10.0.0.4 is allocated but in no used run", plant: func(_ *testing.T, tx *bolt.Tx) error {
			return poolBucket(tx, smallPool, bucketUsed).Delete(key(ip("10.0.0.4")))
		}},
		{kind: FindingAllocationNotInRun, text: `overlap scope "net:blue": 10.0.200.1 is allocated but in no used run`, plant: func(_ *testing.T, tx *bolt.Tx) error {
			return tx.Bucket(bucketScopes).Bucket([]byte("net:blue")).Delete(key(ip("10.0.200.1")))
		}},
		{kind: FindingScopeMismatch, text: `10.0.0.5 records overlap scope "net:red"; the pool's network has scope "net:blue"`, plant: func(t *testing.T, tx *bolt.Tx) error {
			return poolBucket(tx, smallPool, bucketAlloc).Put(key(ip("10.0.0.5")), recordOf(t, owner(5), "net:red"))
		}},
		{kind: FindingDuplicateInScope, text: `overlap scope "net:blue": 10.0.0.1 is held in pool blue/10.0.0.0/16 and in pool blue/10.0.0.0/24`, plant: func(t *testing.T, tx *bolt.Tx) error {
			return holdFully(t, tx, widePool, ip("10.0.0.1"), owner(30), "net:blue")
		}},
		{kind: FindingBoltCheck, text: "unreachable unfreed", file: dropFreelistEntry},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind)+" "+tt.text, func(t *testing.T) {
			path := verifyFixture(t)
			if tt.plant != nil {
				plant(t, path, func(tx *bolt.Tx) error { return tt.plant(t, tx) })
			} else {
				tt.file(t, path)
			}
			v, err := Verify(t.Context(), path, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range v.Findings {
				if f.Kind == tt.kind && strings.Contains(f.Text, tt.text) {
					return
				}
			}
			t.Fatalf("no %s finding containing %q; findings: %v", tt.kind, tt.text, v.Findings)
		})
	}
}

// dropFreelistEntry lowers the count of the freelist page by one, so the page it listed last is
// neither reachable nor free: what bbolt's own check reports.
func dropFreelistEntry(t *testing.T, path string) {
	t.Helper()
	// One more write leaves pages on the freelist.
	plant(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketOwners).Put([]byte("x"), []byte("y")) })
	plant(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketOwners).Delete([]byte("x")) })
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m0, err0 := readMeta(f, 0)
	m1, err1 := readMeta(f, int64(m0.pageSize))
	if err0 != nil || err1 != nil {
		t.Fatal(err0, err1)
	}
	m := m0
	if m1.txid > m0.txid {
		m = m1
	}
	off := int(m.freelist) * int(m.pageSize)
	count := binary.NativeEndian.Uint16(b[off+10:])
	if count == 0 || count == 0xFFFF {
		t.Fatalf("the fixture's freelist lists %d pages; the test needs a short, non-empty one", count)
	}
	binary.NativeEndian.PutUint16(b[off+10:], count-1)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyManyFindingsAreBounded(t *testing.T) {
	path := verifyFixture(t)
	plant(t, path, func(tx *bolt.Tx) error {
		used := poolBucket(tx, smallPool, bucketUsed)
		for i := 100; i < 200; i += 2 {
			a := netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})
			if err := used.Put(key(a), key(a)); err != nil {
				return err
			}
		}
		return nil
	})
	v, err := Verify(t.Context(), path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Findings) != maxFindingsPerKind+1 || !strings.Contains(v.Findings[maxFindingsPerKind].Text, "40 more findings of kind RunHoldsFree") {
		t.Fatalf("%d findings, last %v; want %d and a count of the rest", len(v.Findings), v.Findings[len(v.Findings)-1], maxFindingsPerKind+1)
	}
}

func TestVerifyRefusesWhatIsNoStore(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	garbage := filepath.Join(dir, "garbage.db")
	link := filepath.Join(dir, "link.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("netpool!"), 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(garbage, link); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "missing.db"): "missing.db does not exist",
		empty:                            "empty.db is empty",
		garbage:                          "the database is corrupt: both meta pages are invalid",
		link:                             "is a symbolic link",
		dir:                              "is not a regular file",
	} {
		_, err := Verify(t.Context(), path, time.Second)
		if !errors.Is(err, allocator.ErrStoreUnusable) || !strings.Contains(err.Error(), want) {
			t.Errorf("Verify(%s) = %v; want ErrStoreUnusable containing %q", path, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Verify created the missing file: %v", err)
	}
	if b, _ := os.ReadFile(empty); len(b) != 0 {
		t.Errorf("Verify wrote %d bytes into the empty file", len(b))
	}
}

func TestVerifyWaitsForAWriterThenGivesUp(t *testing.T) {
	path := verifyFixture(t)
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = Verify(t.Context(), path, 50*time.Millisecond)
	if !errors.Is(err, allocator.ErrStoreBusy) {
		t.Fatalf("Verify while a writer holds the file = %v; want ErrStoreBusy", err)
	}
}

// FuzzVerifyCorruptDatabase damages the golden database as FuzzCorruptDatabase does and verifies
// it: Verify must report findings or fail with ErrStoreUnusable, never panic, fault or hang, nor
// run without bound (an overflow of 0xffffffff once made bbolt's check count to four billion).
func FuzzVerifyCorruptDatabase(f *testing.F) {
	golden := mustGolden(f)
	hwm := uint32(highWater(f, golden))
	f.Add(hwm, uint32(0), []byte{})
	f.Add(hwm/2, uint32(0), []byte{})
	f.Add(hwm, uint32(16), []byte{0, 0, 0, 0})
	f.Add(hwm, uint32(2*4096+8), []byte{0x10, 0})
	f.Add(hwm, uint32(3*4096+10), []byte{0xff, 0xff})
	f.Add(hwm, uint32(6*4096+40), []byte("garbage in a leaf"))
	addPageDamageSeeds(f, golden)
	f.Fuzz(func(t *testing.T, size, offset uint32, patch []byte) {
		b := append([]byte(nil), golden[:min(int(size), len(golden))]...)
		if len(b) > 0 {
			copy(b[int(offset)%len(b):], patch)
		}
		path := filepath.Join(t.TempDir(), "netpool.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Verify(t.Context(), path, time.Second); err != nil && !errors.Is(err, allocator.ErrStoreUnusable) {
			t.Fatalf("got %v, want findings or ErrStoreUnusable", err)
		}
	})
}

func FuzzPoolSubnet(f *testing.F) {
	for _, s := range []string{"10.0.0.0/24", "blue/10.0.0.0/24", "a/b/fd00::/64", "10.0.0.5/24", "", "/", "x/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		network, subnet, ok := poolSubnet(key)
		if ok && network+"/"+subnet.String() != key && subnet.String() != key {
			t.Fatalf("poolSubnet(%q) = %q, %s: they do not make the key again", key, network, subnet)
		}
	})
}

// BenchmarkVerify verifies a store of 10,000 allocations in one pool of an overlap scope, every
// third released: the cost of `netpoolctl --db check` on a busy node.
func BenchmarkVerify(b *testing.B) {
	path := filepath.Join(b.TempDir(), "netpool.db")
	s, err := Open(path, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	c := mustConfig(b, `{"range":"10.0.0.0/16","network_name":"bench"}`)
	p := allocator.Pools(c)[0]
	ctx := context.Background()
	err = s.Update(ctx, func(ctx context.Context, tx allocator.Txn) error {
		for i := range 10000 {
			if err := tx.ClaimNext(ctx, p, &allocator.Allocation{Pool: p.Key, Owner: owner(i), Network: c.Name, Scope: p.Scope}); err != nil {
				return err
			}
		}
		for i := 0; i < 10000; i += 3 {
			if _, _, err := tx.Release(ctx, p, owner(i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = s.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		v, err := Verify(b.Context(), path, time.Second)
		if err != nil || len(v.Findings) != 0 {
			b.Fatalf("%v, findings %v", err, v.Findings)
		}
	}
}

// TestVerifyStopsWhenCancelled: the end of the context (netpoolctl's SIGTERM or SIGINT) ends
// Verify at once, while it waits for a writer or while it walks the buckets.
func TestVerifyStopsWhenCancelled(t *testing.T) {
	path := verifyFixture(t)
	t.Run("waiting for a writer", func(t *testing.T) {
		s, err := Open(path, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		_, err = Verify(ctx, path, time.Minute)
		if !errors.Is(err, context.Canceled) || time.Since(start) > 10*time.Second {
			t.Fatalf("Verify cancelled while a writer holds the file = %v after %s; want context.Canceled at once", err, time.Since(start))
		}
	})
	t.Run("walking the buckets", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		v, err := Verify(ctx, path, time.Second)
		if !errors.Is(err, context.Canceled) || v.Pools != 0 {
			t.Fatalf("Verify with an ended context = %+v, %v; want context.Canceled and no result", v, err)
		}
	})
}
