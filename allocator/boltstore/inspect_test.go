package boltstore

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/netpool/netpool/allocator"
)

func TestPoolsListsRecordedRanges(t *testing.T) {
	s, _ := mustOpen(t)
	a := allocator.New(s)
	ctx := context.Background()
	wide := mustConfig(t, `{"network_name":"n","range":"10.0.0.0/24","gateway":"10.0.0.1","exclude":["10.0.0.16/28"]}`)
	if _, err := a.Add(ctx, wide, owner(1)); err != nil {
		t.Fatal(err)
	}
	infos, err := s.Pools()
	if err != nil || len(infos) != 1 {
		t.Fatalf("Pools = %v, %v", infos, err)
	}
	got := infos[0]
	if got.Key != "n/10.0.0.0/24" || got.RangeErr != nil || got.Allocated != 1 || got.Created.IsZero() {
		t.Fatalf("pool = %+v", got)
	}
	if got.Range.Capacity().Int64() != wide.Ranges[0].Capacity().Int64() || got.Range.Gateway != wide.Ranges[0].Gateway {
		t.Fatalf("recorded range %+v, want the config's %+v", got.Range, wide.Ranges[0])
	}
	// A claim by a config with a narrower window records that window; the creation time stays.
	narrow := mustConfig(t, `{"network_name":"n","range":"10.0.0.0/24","range_start":"10.0.0.100","range_end":"10.0.0.110"}`)
	if _, err := a.Add(ctx, narrow, owner(2)); err != nil {
		t.Fatal(err)
	}
	infos, err = s.Pools()
	if err != nil {
		t.Fatal(err)
	}
	if r := infos[0].Range; r.Start.String() != "10.0.0.100" || r.End.String() != "10.0.0.110" || infos[0].Allocated != 2 || !infos[0].Created.Equal(got.Created) {
		t.Fatalf("after the narrow claim: %+v", infos[0])
	}
}

// TestRecordPoolWritesOnlyChanges: a claim by the same config as the last one adds no write to
// its transaction (compared by the pages bbolt writes at commit).
func TestRecordPoolWritesOnlyChanges(t *testing.T) {
	s, _ := mustOpen(t)
	c := mustConfig(t, `{"range":"10.0.0.0/24","exclude":["10.0.0.7"]}`)
	r := c.Ranges[0]
	now := time.Now()
	pages := func(fn func(mb *bolt.Bucket) error) int64 {
		t.Helper()
		var written int64
		err := s.db.Update(func(tx *bolt.Tx) error {
			pb, err := (&txn{tx: tx}).pool("p")
			if err != nil {
				return err
			}
			if err := fn(pb.meta); err != nil {
				return err
			}
			tx.OnCommit(func() { st := tx.Stats(); written = st.GetWrite() })
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return written
	}
	pages(func(mb *bolt.Bucket) error { return recordPool(mb, r, now) })
	empty := pages(func(*bolt.Bucket) error { return nil })
	same := pages(func(mb *bolt.Bucket) error { return recordPool(mb, r, now.Add(time.Hour)) })
	if same != empty {
		t.Fatalf("recording an unchanged range wrote %d pages, an empty transaction %d", same, empty)
	}
	other := c.Ranges[0]
	other.End = other.End.Prev()
	if changed := pages(func(mb *bolt.Bucket) error { return recordPool(mb, other, now) }); changed <= empty {
		t.Fatalf("recording a changed range wrote %d pages, no more than an empty transaction (%d)", changed, empty)
	}
}

func TestOpenExistingRefusesAndChangesNothing(t *testing.T) {
	dir := t.TempDir()
	foreign := filepath.Join(dir, "foreign.db")
	db, err := bolt.Open(foreign, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	foreignBytes, err := os.ReadFile(foreign)
	if err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.db")
	if err := os.Symlink(foreign, link); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.db")
	for path, want := range map[string]string{
		missing: "does not exist",
		filepath.Join(dir, "nodir", "netpool.db"): "does not exist",
		empty:   "is empty",
		link:    "is a symbolic link",
		foreign: `has no "pools" bucket: it is not a netpool store`,
		dir:     "is not a regular file",
	} {
		s, err := OpenExisting(path, time.Second)
		if err == nil {
			_ = s.Close()
			t.Fatalf("%s: opened", path)
		}
		if !errors.Is(err, allocator.ErrStoreUnusable) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrStoreUnusable saying %q", path, err, want)
		}
	}
	if b, err := os.ReadFile(foreign); err != nil || string(b) != string(foreignBytes) {
		t.Fatalf("the foreign bbolt file changed (%v)", err)
	}
	if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
		t.Fatalf("the empty file changed: %v %v", fi, err)
	}
	for _, p := range []string{missing, missing + ".lock", filepath.Join(dir, "nodir")} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s was created (%v)", p, err)
		}
	}
	// A store netpool made opens, and reads what the plugin wrote.
	path := filepath.Join(dir, "netpool.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := allocator.New(s).Add(context.Background(), mustConfig(t, `{"range":"10.0.0.0/30"}`), owner(1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := OpenExisting(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if infos, err := s2.Pools(); err != nil || len(infos) != 1 || infos[0].Allocated != 1 {
		t.Fatalf("Pools = %+v, %v", infos, err)
	}
}

// FuzzDecodeRange: a recorded range, whatever bytes a damaged file holds, decodes or fails
// without a panic, and what decodes encodes to a record that decodes to the same range.
func FuzzDecodeRange(f *testing.F) {
	for _, seed := range []string{
		`{"range":"10.0.0.0/24","range_start":"10.0.0.1","range_end":"10.0.0.254","exclude":["10.0.0.16/28"],"gateway":"10.0.0.1"}`,
		`{"range":"fd00::/64","range_start":"fd00::1","range_end":"fd00::ffff:ffff:ffff:ffff"}`,
		`{"range":"10.0.0.0/24","gateway":"nope"}`, `{"range":""}`, `not json`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		r, err := decodeRange(v)
		if err != nil {
			return
		}
		text, err := encodeRange(r)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeRange(text)
		if err != nil {
			t.Fatalf("%s decoded, but its encoding %s does not: %v", v, text, err)
		}
		if again.Subnet != r.Subnet || again.Start != r.Start || again.End != r.End || again.Gateway != r.Gateway ||
			again.Capacity().Cmp(r.Capacity()) != 0 {
			t.Fatalf("%s: round trip gives %+v, want %+v", v, again, r)
		}
	})
}

// TestPoolsWithoutARange: a pool whose meta bucket has no range (a file from before ranges were
// recorded) or an unreadable one lists with the reason, and its allocations still count.
func TestPoolsWithoutARange(t *testing.T) {
	s, _ := mustOpen(t)
	if _, err := allocator.New(s).Add(context.Background(), mustConfig(t, `{"range":"10.0.0.0/30"}`), owner(1)); err != nil {
		t.Fatal(err)
	}
	for value, want := range map[string]string{"": "no range recorded", `{"range":"10.0.0.0/33"}`: "does not parse"} {
		err := s.db.Update(func(tx *bolt.Tx) error {
			mb := tx.Bucket(bucketPools).Bucket([]byte("10.0.0.0/30")).Bucket(bucketMeta)
			if value == "" {
				return mb.Delete(keyRange)
			}
			return mb.Put(keyRange, []byte(value))
		})
		if err != nil {
			t.Fatal(err)
		}
		infos, err := s.Pools()
		if err != nil || len(infos) != 1 {
			t.Fatalf("Pools = %v, %v", infos, err)
		}
		if infos[0].RangeErr == nil || !strings.Contains(infos[0].RangeErr.Error(), want) || infos[0].Allocated != 1 {
			t.Fatalf("range %q: %+v, want RangeErr saying %q", value, infos[0], want)
		}
	}
}

// BenchmarkRecordPoolUnchanged is what recording the range adds to a claim by the config that
// claimed last: an encoding and a comparison, no write.
func BenchmarkRecordPoolUnchanged(b *testing.B) {
	path := filepath.Join(b.TempDir(), "netpool.db")
	s, err := Open(path, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := mustConfig(b, `{"range":"10.0.0.0/16","gateway":"10.0.0.1","exclude":["10.0.1.0/24","10.0.2.7"]}`)
	now := time.Now()
	err = s.db.Update(func(tx *bolt.Tx) error {
		pb, err := (&txn{tx: tx}).pool("p")
		if err != nil {
			return err
		}
		if err := recordPool(pb.meta, c.Ranges[0], now); err != nil {
			return err
		}
		for b.Loop() {
			if err := recordPool(pb.meta, c.Ranges[0], now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
