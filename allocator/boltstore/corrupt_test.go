package boltstore

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/ipam"
)

// goldenDB is a database holding 1500 allocations, built once per test binary; tests and the
// fuzz target damage copies of it. Its owners and alloc buckets are two levels deep: a branch page
// over leaves.
var goldenDB = sync.OnceValues(func() ([]byte, error) { return buildGolden(1500) })

// goldenConfig is the pool of the golden databases, which exercise uses too.
const goldenConfig = `{"range":"10.0.0.0/16"}`

// buildGolden builds a database of n allocations in one pool, every third released, and returns
// its bytes.
func buildGolden(n int) ([]byte, error) {
	dir, err := os.MkdirTemp("", "harden-node-golden-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "golden.db")
	s, err := Open(path, time.Second)
	if err != nil {
		return nil, err
	}
	c, err := loadConfig(goldenConfig)
	if err != nil {
		return nil, err
	}
	// Two transactions rather than 2n fsynced calls: the file is what matters, not how it grew.
	p := allocator.Pools(c)[0]
	err = s.Update(context.Background(), func(ctx context.Context, tx allocator.Txn) error {
		for i := range n {
			if err := tx.ClaimNext(ctx, p, &allocator.Allocation{Pool: p.Key, Owner: owner(i), Network: c.Name, Scope: p.Scope}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Release every third, so the freelist and the runs are not trivial.
	err = s.Update(context.Background(), func(ctx context.Context, tx allocator.Txn) error {
		for i := 0; i < n; i += 3 {
			if _, _, err := tx.Release(ctx, p, owner(i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := s.Close(); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

func mustGolden(t testing.TB) []byte {
	t.Helper()
	b, err := goldenDB()
	if err != nil {
		t.Fatalf("building the golden database: %v", err)
	}
	return b
}

// exercise opens path and runs every kind of call on it, as the plugin would; it returns the
// first error, which must be nil or ErrStoreUnusable.
func exercise(path string) error {
	s, err := Open(path, time.Second)
	if err != nil {
		return err
	}
	defer s.Close()
	c, err := loadConfig(goldenConfig)
	if err != nil {
		return err
	}
	a := allocator.New(s)
	ctx := context.Background()
	if err := a.Status(ctx, c); err != nil {
		return err
	}
	if _, err := a.Add(ctx, c, owner(9999)); err != nil {
		return err
	}
	if _, err := a.Del(ctx, c, owner(1)); err != nil {
		return err
	}
	// GC visits every allocation of the pool. (bbolt's own consistency check is no part of the
	// plugin's path: it walks the file on a goroutine of its own, where a fault cannot be contained.)
	_, err = a.GC(ctx, c, []allocator.Owner{owner(2)})
	return err
}

func writeDB(t testing.TB, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "netpool.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// highWater is the size of the pages the golden database's meta page says are in use; bbolt
// grows the file in larger steps, so the file may be longer.
func highWater(t testing.TB, b []byte) int {
	t.Helper()
	path := writeDB(t, b)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m0, err0 := readMeta(f, 0)
	m1, err1 := readMeta(f, 4096)
	if err0 != nil || err1 != nil {
		t.Fatalf("golden meta pages: %v, %v", err0, err1)
	}
	if m1.txid > m0.txid {
		m0 = m1
	}
	return int(m0.pgid) * int(m0.pageSize)
}

func TestTruncatedFileIsUnusable(t *testing.T) {
	golden := mustGolden(t)
	hwm := highWater(t, golden)
	if hwm < 64<<10 {
		t.Fatalf("golden database uses only %d bytes", hwm)
	}
	for _, size := range []int{1, 4095, 4096, 16 << 10, 16<<10 + 1, hwm / 2, hwm - 4096, hwm - 1} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			path := writeDB(t, golden[:size])
			err := exercise(path)
			if !errors.Is(err, allocator.ErrStoreUnusable) || !strings.Contains(err.Error(), path) {
				t.Fatalf("a database truncated to %d of %d bytes in use: %v, want ErrStoreUnusable naming the file", size, hwm, err)
			}
			if fi, err := os.Stat(path); err != nil || fi.Size() != int64(size) {
				t.Errorf("the truncated file was changed: %v, %v", fi, err)
			}
		})
	}
	t.Run("only the unused tail", func(t *testing.T) {
		if err := exercise(writeDB(t, golden[:hwm])); err != nil {
			t.Fatalf("a database cut at its high water mark (%d bytes) lost nothing: %v", hwm, err)
		}
	})
}

func TestCorruptPagesAreUnusable(t *testing.T) {
	golden := mustGolden(t)
	pages := highWater(t, golden) / 4096
	damage := map[string]func(b []byte){
		"both meta pages": func(b []byte) { copy(b[16:], make([]byte, 64)); copy(b[4096+16:], make([]byte, 64)) },
		"every data page": func(b []byte) {
			for p := 2; p < pages; p++ {
				copy(b[p*4096:], strings.Repeat("\xff", 4096))
			}
		},
		"page headers point far away": func(b []byte) {
			for p := 2; p < pages; p++ {
				copy(b[p*4096+12:], []byte{0xff, 0xff, 0xff, 0x7f}) // overflow
			}
		},
	}
	// A sample of pages, each damaged two ways: the first ones (freelist, root, branches) and a
	// spread over the rest (leaves, nested buckets).
	for p := 2; p < pages; p += max(1, min(p/2, pages/16)) {
		damage[fmt.Sprintf("page %d zeroed", p)] = func(b []byte) { copy(b[p*4096:], make([]byte, 4096)) }
		damage[fmt.Sprintf("page %d bodies flipped", p)] = func(b []byte) {
			for i := p*4096 + 16; i < (p+1)*4096; i += 7 {
				b[i] ^= 0x5a
			}
		}
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			b := append([]byte(nil), golden...)
			fn(b)
			if err := exercise(writeDB(t, b)); err != nil && !errors.Is(err, allocator.ErrStoreUnusable) {
				t.Fatalf("got %v, want nil or ErrStoreUnusable", err)
			}
		})
	}
}

func TestSymlinkedPathIsRefused(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "netpool.db")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, time.Second)
	if !errors.Is(err, allocator.ErrStoreUnusable) || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Fatalf("open through a symbolic link = %v", err)
	}
	if fi, err := os.Stat(target); err != nil || fi.Size() != 0 {
		t.Fatalf("the link's target was written: %v, %v", fi, err)
	}
	// A dangling link is refused too: following it would create a file wherever it points.
	dangling := filepath.Join(dir, "dangling.db")
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), dangling); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dangling, time.Second); !errors.Is(err, allocator.ErrStoreUnusable) {
		t.Fatalf("open through a dangling link = %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "elsewhere")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the dangling link's target was created: %v", err)
	}
}

func TestNonRegularPathIsRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.db")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "dir.db")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, sub, "/dev/zero"} {
		done := make(chan error, 1)
		go func() { _, err := Open(path, time.Second); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, allocator.ErrStoreUnusable) || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("open of %s = %v", path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("open of %s hangs", path)
		}
	}
}

func TestEmptyFileAndLeftoverAreReplaced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "netpool.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+creatingSuffix, []byte("half a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := exercise(path); err != nil {
		t.Fatalf("an empty file at the path: %v", err)
	}
	if _, err := os.Stat(path + creatingSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the leftover %s is still there: %v", path+creatingSuffix, err)
	}
}

func loadConfig(ipamJSON string) (*ipam.Config, error) {
	return ipam.Load([]byte(`{"cniVersion":"1.1.0","name":"net1","ipam":`+ipamJSON+`}`), "", nil)
}

// TestBackwardRunCannotLoopTheSearch: a damaged "used" bucket whose run ends before it starts,
// next to a run that reaches back over it, must not send the free search round for ever.
func TestBackwardRunCannotLoopTheSearch(t *testing.T) {
	s, _ := mustOpen(t)
	c := mustConfig(t, `{"range":"10.0.0.0/24"}`)
	p := allocator.Pools(c)[0]
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	err := s.Update(context.Background(), func(ctx context.Context, tx allocator.Txn) error {
		// Make the pool's buckets, then damage its runs: .10-.19, and .20 "ending" at .15.
		if _, err := tx.HasFree(ctx, p); err != nil {
			return err
		}
		used := tx.(*txn).tx.Bucket(bucketPools).Bucket([]byte(p.Key)).Bucket(bucketUsed)
		if err := used.Put(key(a("10.0.0.1")), key(a("10.0.0.19"))); err != nil {
			return err
		}
		return used.Put(key(a("10.0.0.20")), key(a("10.0.0.15")))
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := allocator.New(s).Add(context.Background(), c, owner(1))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ADD on damaged runs: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ADD on damaged runs loops")
	}
}
