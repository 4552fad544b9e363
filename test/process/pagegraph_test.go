package process

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/netpool/netpool/test/harness"
)

// The bbolt page format, as far as these tests edit it: a page of pageSize bytes starts with a
// 16-byte header {id u64, flags u16, count u16, overflow u32}; a branch page's elements follow,
// 16 bytes each, the child's page id in the last 8.
const (
	pageSize   = 4096
	headerSize = 16
	branchFlag = 0x01
)

// ownersRoot is the root page of the owners bucket of the database image db, as bbolt reports it.
func ownersRoot(t *testing.T, db []byte) uint64 {
	t.Helper()
	path := filepath.Join(t.TempDir(), "layout.db")
	if err := os.WriteFile(path, db, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := bolt.Open(path, 0, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var root uint64
	if err := b.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket([]byte("owners")).Root())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if pageFlags(db, root) != branchFlag {
		t.Fatalf("the owners root page %d is not a branch", root)
	}
	return root
}

func pageFlags(db []byte, id uint64) uint16 {
	return binary.NativeEndian.Uint16(db[id*pageSize+8:])
}

// childOffset is where, in db, element i of branch page id names its child.
func childOffset(id uint64, i int) uint64 { return id*pageSize + headerSize + uint64(i)*16 + 8 }

func childOf(db []byte, id uint64, i int) uint64 {
	return binary.NativeEndian.Uint64(db[childOffset(id, i):])
}

// lastElement is the index of the last element of page id: the one an ADD's new key (greater
// than every key held) is looked up through.
func lastElement(db []byte, id uint64) int {
	return int(binary.NativeEndian.Uint16(db[id*pageSize+10:])) - 1
}

// TestPageCycleAnswersUnusable: one 8-byte child pointer changed so that a branch page names an
// ancestor (itself, or its parent in a deeper tree) once made ADD die of a stack overflow (exit 2,
// no CNI JSON, ~1 GB) while STATUS said ready; a leaf with overflow 0xffffffff sent it counting
// pages without bound. The built plugin must answer 105 as JSON to ADD and DEL and 50 to STATUS,
// each time, within seconds. (The child's peak RSS is not asserted: the kernel charges it the
// test binary's, which it shares until exec.)
func TestPageCycleAnswersUnusable(t *testing.T) {
	netpoolPath(t) // built before the test's time starts
	ctx := testContext(t)
	type damage struct {
		name  string
		held  int
		edit  func(db []byte, root uint64)
		words string
	}
	for _, d := range []damage{
		{"a branch names itself", 1500, func(db []byte, root uint64) {
			binary.NativeEndian.PutUint64(db[childOffset(root, lastElement(db, root)):], root)
		}, "a cycle or a shared page"},
		{"a branch names its parent", 12000, func(db []byte, root uint64) {
			mid := childOf(db, root, lastElement(db, root))
			if pageFlags(db, mid) != branchFlag {
				t.Fatalf("page %d under the owners root is not a branch", mid)
			}
			binary.NativeEndian.PutUint64(db[childOffset(mid, lastElement(db, mid)):], root)
		}, "a cycle or a shared page"},
		{"a leaf with overflow 0xffffffff", 1500, func(db []byte, root uint64) {
			binary.NativeEndian.PutUint32(db[childOf(db, root, lastElement(db, root))*pageSize+12:], 0xFFFFFFFF)
		}, "overflow pages, past the high-water mark"},
	} {
		t.Run(d.name, func(t *testing.T) {
			f := newFixture(t, map[string]any{"range": "10.60.0.0/16"})
			db := f.populate(ctx, d.held)
			d.edit(db, ownersRoot(t, db))
			// Written after the populating call, as an editor or a bad copy would: the state that
			// call remembered as sound is not this one.
			if err := os.WriteFile(f.dbPath, db, 0o600); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				for _, c := range []struct {
					verb, container string
					code            uint
				}{{"ADD", "new", codeStoreUnusable}, {"DEL", containerID("held", 7), codeStoreUnusable}, {"STATUS", "", codePluginUnavailable}} {
					out, err := f.exec(ctx, c.verb, c.container)
					wantCode(t, c.verb, out, err, c.code)
					if !strings.Contains(string(out.Stdout), f.dbPath) || !strings.Contains(string(out.Stdout), d.words) {
						t.Errorf("%s's error %s does not name the file and say %q", c.verb, out.Stdout, d.words)
					}
					if out.Elapsed > 10*time.Second {
						t.Errorf("%s took %s; want an answer in seconds", c.verb, out.Elapsed)
					}
				}
			}
			if got, err := os.ReadFile(f.dbPath); err != nil || !bytes.Equal(got, db) {
				t.Errorf("the damaged file was changed (%v)", err)
			}
		})
	}
}

// TestCheckOfPageCycleIsBounded: `netpoolctl --db check` on a leaf with overflow 0xffffffff ran
// for over ten minutes in 3 GB; it must refuse the file at once, naming the page.
func TestCheckOfPageCycleIsBounded(t *testing.T) {
	ctl := harness.MustCommandBinary(t, "netpoolctl") // built before the test's time starts
	f := newFixture(t, map[string]any{"range": "10.61.0.0/16"})
	ctx := testContext(t)
	db := f.populate(ctx, 1500)
	binary.NativeEndian.PutUint32(db[childOf(db, ownersRoot(t, db), 0)*pageSize+12:], 0xFFFFFFFF)
	if err := os.WriteFile(f.dbPath, db, 0o600); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(runCtx, ctl, "--db", f.dbPath, "check")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("netpoolctl check = %v after %s (stderr %q); want exit status 1", err, time.Since(start), stderr.String())
	}
	if !strings.Contains(stderr.String(), "overflow pages, past the high-water mark") || !strings.Contains(stderr.String(), f.dbPath) {
		t.Errorf("netpoolctl check's error %q does not name the file and the page", stderr.String())
	}
}

// TestCheckEndsOnSIGTERM: `netpoolctl --db check` waiting for a writer ended only at its request
// timeout, whatever signal it got; SIGTERM and SIGINT must end it at once.
func TestCheckEndsOnSIGTERM(t *testing.T) {
	ctl := harness.MustCommandBinary(t, "netpoolctl") // built before the test's time starts
	ctx := testContext(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			f := newFixture(t, map[string]any{"range": "10.62.0.0/24"})
			f.mustAdd(ctx, "c1")
			writer := f.mustOpen() // holds the file as a plugin does while it writes
			defer writer.Close()
			cmd := exec.CommandContext(ctx, ctl, "--db", f.dbPath, "--request-timeout", "2m", "check")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				t.Fatalf("netpoolctl check ended before the signal while a writer holds the file: %v (stderr %q)", err, stderr.String())
			case <-time.After(500 * time.Millisecond):
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				var exitErr *exec.ExitError
				if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 || !strings.Contains(stderr.String(), "context canceled") {
					t.Fatalf("netpoolctl check after %s = %v (stderr %q); want exit status 1, context canceled", sig, err, stderr.String())
				}
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("netpoolctl check ignored %s for 10 s", sig)
			}
		})
	}
}
