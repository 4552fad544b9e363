package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/test/harness"
)

// Codes the corrupt-store tests expect (README, error codes).
const (
	codeStoreUnusable     uint = 105
	codePluginUnavailable uint = 50
	codeInvalidEnv        uint = 4
)

// populate writes n allocations into the fixture's store in one transaction and returns the
// database file's bytes.
func (f *fixture) populate(ctx context.Context, n int) []byte {
	f.t.Helper()
	s := f.mustOpen()
	p := allocator.Pools(f.config())[0]
	err := s.Update(ctx, func(ctx context.Context, tx allocator.Txn) error {
		for i := range n {
			al := &allocator.Allocation{Pool: p.Key, Owner: allocator.Owner{ContainerID: containerID("held", i), IfName: "eth0"}, Network: network}
			if err := tx.ClaimNext(ctx, p, al); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		f.t.Fatal(err)
	}
	b, err := os.ReadFile(f.dbPath)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// wantCode asserts that the plugin process answered with CNI error code: a JSON error on stdout
// and a clean exit, not a crash.
func wantCode(t *testing.T, what string, out harness.Outcome, err error, code uint) {
	t.Helper()
	if got := harness.CNIErrorCode(err); got != code {
		t.Fatalf("%s: %v (stdout %q, stderr %.300q); want CNI error %d", what, err, out.Stdout, out.Stderr, code)
	}
}

// TestCorruptStoreAnswersUnusable runs the built plugin against database files that the test
// truncates and damages: every call answers CNI error 105 (STATUS 50) as JSON, and no call crashes
// with a panic, SIGSEGV or SIGBUS, however often it is repeated.
func TestCorruptStoreAnswersUnusable(t *testing.T) {
	ctx := testContext(t)
	f := newFixture(t, map[string]any{"range": "10.50.0.0/20"})
	golden := f.populate(ctx, 1500)
	used := usedBytes(t, golden)

	damages := map[string][]byte{}
	for _, size := range []int{4096, 16<<10 + 100, used / 3, used / 2, used - 4096, used - 1} {
		damages[fmt.Sprintf("truncated to %d of %d bytes", size, used)] = golden[:size]
	}
	zeroed := append([]byte(nil), golden...)
	copy(zeroed[:2*4096], make([]byte, 2*4096))
	damages["both meta pages zeroed"] = zeroed

	for name, b := range damages {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(f.dbPath, b, 0o600); err != nil {
				t.Fatal(err)
			}
			for range 2 { // and again: a damaged file must not crash later calls either
				out, err := f.exec(ctx, "ADD", "new")
				wantCode(t, "ADD", out, err, codeStoreUnusable)
				if !strings.Contains(string(out.Stdout), f.dbPath) {
					t.Errorf("ADD's error %s does not name the file", out.Stdout)
				}
				out, err = f.exec(ctx, "DEL", containerID("held", 7))
				wantCode(t, "DEL", out, err, codeStoreUnusable)
				out, err = f.exec(ctx, "STATUS", "")
				wantCode(t, "STATUS", out, err, codePluginUnavailable)
			}
		})
	}
}

// TestDamagedPagesNeverCrashThePlugin overwrites pages of a real database with garbage: each call
// may succeed (the damage missed what it reads) or answer 105, but never crash.
func TestDamagedPagesNeverCrashThePlugin(t *testing.T) {
	ctx := testContext(t)
	f := newFixture(t, map[string]any{"range": "10.51.0.0/20"})
	golden := f.populate(ctx, 1500)
	pages := usedBytes(t, golden) / 4096
	for p := 2; p < pages; p += max(1, pages/12) {
		t.Run(fmt.Sprintf("page %d", p), func(t *testing.T) {
			b := append([]byte(nil), golden...)
			for i := p * 4096; i < (p+1)*4096; i += 5 {
				b[i] ^= 0xa5
			}
			if err := os.WriteFile(f.dbPath, b, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, verb := range []string{"ADD", "DEL", "STATUS"} {
				out, err := f.exec(ctx, verb, containerID("held", 3))
				if code := harness.CNIErrorCode(err); err != nil && code != codeStoreUnusable && code != codePluginUnavailable {
					t.Fatalf("%s on a database with page %d damaged: %v (stderr %.300q)", verb, p, err, out.Stderr)
				}
			}
		})
	}
}

// usedBytes is the size of the pages a database's newer meta page says are in use.
func usedBytes(t *testing.T, db []byte) int {
	t.Helper()
	n, err := harness.BboltUsedBytes(db)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSymlinkedStoreIsRefused: a bbolt.path that is a symbolic link is refused with 105, and the
// file it points at is left alone (bbolt would have initialised an empty one).
func TestSymlinkedStoreIsRefused(t *testing.T) {
	ctx := testContext(t)
	f := newFixture(t, map[string]any{"range": "10.52.0.0/24"})
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, f.dbPath); err != nil {
		t.Fatal(err)
	}
	out, err := f.exec(ctx, "ADD", "c1")
	wantCode(t, "ADD through a symbolic link", out, err, codeStoreUnusable)
	if !strings.Contains(string(out.Stdout), "symbolic link") {
		t.Errorf("the error %s does not say why", out.Stdout)
	}
	if fi, err := os.Stat(target); err != nil || fi.Size() != 0 {
		t.Errorf("the link's target was written: %v, %v", fi, err)
	}
}

// TestFullDiskIsUnusableNotABug: ENOSPC, at creation and during use, is 105 (not 999), leaves no
// partial file, and the node works again once space is back.
func TestFullDiskIsUnusableNotABug(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a size-limited tmpfs needs root")
	}
	ctx := testContext(t)
	dir, err := os.MkdirTemp("", "harden-node-full-")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k,mode=0700"); err != nil {
		t.Fatalf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
		_ = os.Remove(dir)
	})
	f := newFixture(t, map[string]any{"range": "10.53.0.0/16"})
	f.dbPath = filepath.Join(dir, "netpool.db")
	f.ipam = harness.NetpoolIPAM(f.dbPath, map[string]any{"range": "10.53.0.0/16"})
	if f.conf, err = harness.NetConf(network, f.ipam); err != nil {
		t.Fatal(err)
	}

	filler := filepath.Join(dir, "filler")
	fill := func(leave int64) {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		if free := int64(st.Bavail) * st.Bsize; free > leave {
			if err := os.WriteFile(filler, make([]byte, free-leave), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}

	fill(4096) // room for one of the four pages a new database needs
	out, err := f.exec(ctx, "ADD", "c0")
	wantCode(t, "ADD on a full disk at creation", out, err, codeStoreUnusable)
	if _, err := os.Lstat(f.dbPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a partial database was left at %s: %v", f.dbPath, err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	f.mustAdd(ctx, "c0")

	fill(0)
	var failed bool
	for i := 1; i <= 200 && !failed; i++ {
		out, err := f.exec(ctx, "ADD", containerID("c", i))
		if err != nil {
			wantCode(t, "ADD on a full disk during use", out, err, codeStoreUnusable)
			if !strings.Contains(string(out.Stdout), "no space left") {
				t.Errorf("the error %s does not name ENOSPC", out.Stdout)
			}
			failed = true
		}
	}
	if !failed {
		t.Fatal("200 ADDs on a full disk all succeeded; the disk was not full")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	f.mustAdd(ctx, "after")
	f.held(ctx) // runs bbolt's consistency check
}

// TestOversizedContainerIDIsInvalidEnvironment: a 40 KiB CNI_CONTAINERID is code 4, not 999
// "key too large".
func TestOversizedContainerIDIsInvalidEnvironment(t *testing.T) {
	ctx := testContext(t)
	f := newFixture(t, map[string]any{"range": "10.54.0.0/24"})
	out, err := f.exec(ctx, "ADD", strings.Repeat("c", 40<<10))
	wantCode(t, "ADD with a 40 KiB containerID", out, err, codeInvalidEnv)
}
