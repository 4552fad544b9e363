package boltstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netpool/netpool/allocator"
)

// walksDuring counts the page graph walks fn makes.
func walksDuring(fn func()) int64 {
	before := pageGraphWalks.Load()
	fn()
	return pageGraphWalks.Load() - before
}

// call opens path, runs an ADD of owner i (a commit) or only a STATUS (no commit), and closes.
func call(t *testing.T, path string, add bool, i int) error {
	t.Helper()
	s, err := Open(path, time.Second)
	if err != nil {
		return err
	}
	c := mustConfig(t, goldenConfig)
	a := allocator.New(s)
	if add {
		_, err = a.Add(context.Background(), c, owner(i))
	} else {
		err = a.Status(context.Background(), c)
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

// TestSoundStateIsRemembered: a file is walked once; the state each call leaves behind (after a
// commit or none) is remembered, so the next call does not walk it again.
func TestSoundStateIsRemembered(t *testing.T) {
	path := writeDB(t, mustGolden(t))
	if n := walksDuring(func() {
		if err := call(t, path, false, 0); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Fatalf("the first call on a copied file walked %d times, want 1", n)
	}
	for i := range 5 {
		add := i%2 == 0
		if n := walksDuring(func() {
			if err := call(t, path, add, 5000+i); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Fatalf("call %d (ADD %v) on the state the last call left walked %d times, want 0", i, add, n)
		}
	}
	// A new file is remembered from its creation on.
	fresh := writeDB(t, nil)
	if err := os.Remove(fresh); err != nil {
		t.Fatal(err)
	}
	if err := call(t, fresh, true, 1); err != nil {
		t.Fatal(err)
	}
	if n := walksDuring(func() {
		if err := call(t, fresh, true, 2); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("the second call on a file netpool created walked %d times, want 0", n)
	}
}

// TestChangedFileIsWalkedAgain: whatever changes the file outside netpool's calls makes the next
// call walk it, and so find the damage: a write in place even with its mtime put back (the ctime
// moves), a copy over it, a remembered state of another boot, and a lock file whose record is
// garbage.
func TestChangedFileIsWalkedAgain(t *testing.T) {
	cycle := pageDamages[0] // a branch element names its own page
	for name, change := range map[string]func(t *testing.T, path string, damaged []byte){
		"written in place, mtime restored": func(t *testing.T, path string, damaged []byte) {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(damaged, 0); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		},
		"copied over": func(t *testing.T, path string, damaged []byte) {
			if err := os.WriteFile(path+".new", damaged, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".new", path); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := writeDB(t, mustGolden(t))
			if err := call(t, path, true, 9001); err != nil {
				t.Fatal(err)
			}
			now, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			p := pagesOf(t, now)
			damaged := append([]byte(nil), now...)
			cycle.edit(t, damaged, p)
			change(t, path, damaged)
			err = call(t, path, true, 9002)
			if !errors.Is(err, allocator.ErrStoreUnusable) || !strings.Contains(err.Error(), cycle.want) {
				t.Fatalf("a call after the file changed = %v; want the walk's refusal %q", err, cycle.want)
			}
		})
	}

	t.Run("another boot", func(t *testing.T) {
		path := writeDB(t, mustGolden(t))
		if err := call(t, path, false, 0); err != nil {
			t.Fatal(err)
		}
		restore := bootID
		t.Cleanup(func() { bootID = restore })
		bootID = func() []byte { return []byte("0123456789abcdef") }
		if n := walksDuring(func() {
			if err := call(t, path, false, 0); err != nil {
				t.Fatal(err)
			}
		}); n != 1 {
			t.Fatalf("the first call after a reboot walked %d times, want 1", n)
		}
	})

	t.Run("unknown boot", func(t *testing.T) {
		path := writeDB(t, mustGolden(t))
		restore := bootID
		t.Cleanup(func() { bootID = restore })
		bootID = func() []byte { return nil }
		for range 2 {
			if n := walksDuring(func() {
				if err := call(t, path, true, 1); err != nil {
					t.Fatal(err)
				}
			}); n != 1 {
				t.Fatalf("a call without a boot id walked %d times, want 1: nothing can be remembered", n)
			}
		}
	})

	t.Run("garbage in the lock file", func(t *testing.T) {
		path := writeDB(t, mustGolden(t))
		if err := call(t, path, false, 0); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+".lock", []byte(strings.Repeat("x", stateKeySize)), 0o600); err != nil {
			t.Fatal(err)
		}
		if n := walksDuring(func() {
			if err := call(t, path, false, 0); err != nil {
				t.Fatal(err)
			}
		}); n != 1 {
			t.Fatalf("a call with a garbage record walked %d times, want 1", n)
		}
	})
}

// TestFailedCallIsNotRemembered: a call that fails because of the file (here a commit on a full
// disk) leaves its state unremembered, so the next call walks.
func TestFailedCallIsNotRemembered(t *testing.T) {
	dir := mountTmpfs(t, "2m")
	path := filepath.Join(dir, "netpool.db")
	golden := mustGolden(t)
	// Without the unused tail, so that the commit below must grow the file.
	if err := os.WriteFile(path, golden[:highWater(t, golden)], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := call(t, path, false, 0); err != nil {
		t.Fatal(err)
	}
	filler := fillTo(t, dir, 0)
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p := allocator.Pools(mustConfig(t, goldenConfig))[0]
	// A transaction large enough to need new pages on any layout.
	err = s.Update(context.Background(), func(ctx context.Context, tx allocator.Txn) error {
		for i := range 3000 {
			if err := tx.ClaimNext(ctx, p, &allocator.Allocation{Pool: p.Key, Owner: owner(10000 + i), Scope: p.Scope}); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, allocator.ErrStoreUnusable) {
		t.Fatalf("a commit on a full disk = %v, want ErrStoreUnusable", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if n := walksDuring(func() {
		if err := call(t, path, true, 9999); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Fatalf("the call after a failed one walked %d times, want 1", n)
	}
}

// TestFaultForgetsTheState: after a fault inside a transaction (a panic, as bbolt raises on damage
// the walk did not see) nothing is remembered as sound, so the next call walks.
func TestFaultForgetsTheState(t *testing.T) {
	path := writeDB(t, mustGolden(t))
	if err := call(t, path, false, 0); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(context.Background(), func(context.Context, allocator.Txn) error { panic("invalid page type") })
	if !errors.Is(err, allocator.ErrStoreUnusable) {
		t.Fatalf("a panic inside the transaction = %v, want ErrStoreUnusable", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := walksDuring(func() {
		if err := call(t, path, false, 0); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Fatalf("the call after a fault walked %d times, want 1", n)
	}
}

// TestReplacedFileIsRefused: the file bbolt opens must be the one prepare checked; one renamed
// over the path in between is refused.
func TestReplacedFileIsRefused(t *testing.T) {
	checked, other := writeDB(t, mustGolden(t)), writeDB(t, mustGolden(t))
	fc, err := os.Open(checked)
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	fo, err := os.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	defer fo.Close()
	st, err := checkFile(fc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameFile(fc, st); err != nil {
		t.Fatalf("the checked file itself: %v", err)
	}
	if err := sameFile(fo, st); !errors.Is(err, allocator.ErrStoreUnusable) || !strings.Contains(err.Error(), "was replaced") {
		t.Fatalf("another file = %v, want ErrStoreUnusable saying it was replaced", err)
	}
}
