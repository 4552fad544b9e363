package boltstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netpool/netpool/allocator"
)

// mountTmpfs mounts a tmpfs of size bytes for the test and returns its path.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a size-limited tmpfs needs root")
	}
	dir, err := os.MkdirTemp("", "harden-node-tmpfs-")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		_ = os.Remove(dir)
		t.Fatalf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
		_ = os.Remove(dir)
	})
	return dir
}

// fillTo writes a filler file until at most leave bytes of the file system at dir are free, and
// returns the filler's path, whose removal gives the space back.
func fillTo(t *testing.T, dir string, leave int64) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	filler := filepath.Join(dir, "filler")
	if free > leave {
		if err := os.WriteFile(filler, make([]byte, free-leave), 0o600); err != nil {
			t.Fatalf("filling %s: %v", dir, err)
		}
	}
	return filler
}

// TestFullDiskAtCreation: a database that cannot be created for want of space leaves nothing at
// its path, so once space is back the next call creates it (bbolt's in-place creation left a
// partial file that failed every later call with "file size too small").
func TestFullDiskAtCreation(t *testing.T) {
	dir := mountTmpfs(t, "256k")
	path := filepath.Join(dir, "netpool.db")
	filler := fillTo(t, dir, 4096) // room for one page of bbolt's four
	_, err := Open(path, time.Second)
	if !errors.Is(err, allocator.ErrStoreUnusable) || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("open on a full disk = %v, want ErrStoreUnusable naming ENOSPC", err)
	}
	for _, p := range []string{path, path + creatingSuffix} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after the failed creation: %v", p, err)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := exercise(path); err != nil {
		t.Fatalf("once space is back: %v", err)
	}
}

// TestFullDiskDuringUse: a commit that hits a full disk is ErrStoreUnusable (CNI 105), changes
// nothing, and the store works again once space is back.
func TestFullDiskDuringUse(t *testing.T) {
	dir := mountTmpfs(t, "512k")
	path := filepath.Join(dir, "netpool.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, err := loadConfig(`{"range":"10.0.0.0/16"}`)
	if err != nil {
		t.Fatal(err)
	}
	a := allocator.New(s)
	ctx := context.Background()
	if _, err := a.Add(ctx, c, owner(0)); err != nil {
		t.Fatal(err)
	}
	filler := fillTo(t, dir, 0)
	p := allocator.Pools(c)[0]
	// A transaction large enough to need new pages on any layout.
	err = s.Update(ctx, func(ctx context.Context, tx allocator.Txn) error {
		for i := 1; i <= 2000; i++ {
			if err := tx.ClaimNext(ctx, p, &allocator.Allocation{Pool: p.Key, Owner: owner(i), Network: c.Name}); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, allocator.ErrStoreUnusable) || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("a commit on a full disk = %v, want ErrStoreUnusable naming ENOSPC", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, time.Second)
	if err != nil {
		t.Fatalf("reopening once space is back: %v", err)
	}
	defer s.Close()
	if err := s.Check(); err != nil {
		t.Fatalf("consistency check after the failed commit: %v", err)
	}
	a = allocator.New(s)
	got, err := a.Add(ctx, c, owner(1))
	if err != nil {
		t.Fatalf("ADD once space is back: %v", err)
	}
	if got[0].Addr.String() != "10.0.0.2" {
		t.Errorf("ADD after the failed commit got %s, want 10.0.0.2: the failed transaction left something behind", got[0].Addr)
	}
}
