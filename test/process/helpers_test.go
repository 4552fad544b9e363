package process

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/allocator/boltstore"
	"github.com/netpool/netpool/ipam"
	"github.com/netpool/netpool/test/harness"
)

// Codes of the CNI errors the tests expect: 11 is the spec's "try again later", 100 is netpool's
// own "pool exhausted" (README, error codes).
const (
	codeTryAgainLater uint = 11
	codePoolExhausted uint = 100
)

const network = "net1"

// testContext bounds a whole test, so that a hung plugin fails it instead of the test binary.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// netpoolPath returns the freshly built netpool plugin.
func netpoolPath(t *testing.T) string {
	t.Helper()
	return filepath.Join(harness.MustBinDir(t), "netpool")
}

// fixture is one network on one bbolt file in the test's temp dir.
type fixture struct {
	t      *testing.T
	plugin string
	dbPath string
	ipam   map[string]any
	conf   []byte
}

// newFixture prepares a network whose ipam section is fields (range, range_start, ...) on a fresh
// bbolt file.
func newFixture(t *testing.T, fields map[string]any) *fixture {
	t.Helper()
	f := &fixture{t: t, plugin: netpoolPath(t), dbPath: filepath.Join(t.TempDir(), "netpool.db")}
	f.ipam = harness.NetpoolIPAM(f.dbPath, fields)
	conf, err := harness.NetConf(network, f.ipam)
	if err != nil {
		t.Fatal(err)
	}
	f.conf = conf
	return f
}

// exec runs one verb for containerID/eth0.
func (f *fixture) exec(ctx context.Context, verb, containerID string) (harness.Outcome, error) {
	return harness.Exec(ctx, f.plugin, harness.Invocation{
		Command: verb, ContainerID: containerID, IfName: "eth0", Config: f.conf,
	})
}

// mustAdd runs ADD and returns the one address of the result.
func (f *fixture) mustAdd(ctx context.Context, containerID string) netip.Addr {
	f.t.Helper()
	a, err := f.add(ctx, containerID)
	if err != nil {
		f.t.Fatal(err)
	}
	return a
}

// add runs ADD and returns the one address of the result.
func (f *fixture) add(ctx context.Context, containerID string) (netip.Addr, error) {
	out, err := f.exec(ctx, "ADD", containerID)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("ADD %s: %w", containerID, err)
	}
	addrs, err := out.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("ADD %s: %w", containerID, err)
	}
	if len(addrs) != 1 {
		return netip.Addr{}, fmt.Errorf("ADD %s returned %v, want one address", containerID, addrs)
	}
	return addrs[0], nil
}

// config loads the fixture's network config the way the plugin does, for in-process access.
func (f *fixture) config() *ipam.Config {
	f.t.Helper()
	c, err := ipam.Load(f.conf, "", nil)
	if err != nil {
		f.t.Fatalf("failed to load the test's own config: %v", err)
	}
	return c
}

// mustOpen opens the fixture's store in-process; it holds the store's lock until closed.
func (f *fixture) mustOpen() *boltstore.Store {
	f.t.Helper()
	s, err := boltstore.Open(f.dbPath, 5*time.Second)
	if err != nil {
		f.t.Fatalf("failed to open %s: %v", f.dbPath, err)
	}
	return s
}

// held returns every allocation of the fixture's pool, read in-process, after checking the file
// with bbolt's consistency check.
func (f *fixture) held(ctx context.Context) []allocator.Allocation {
	f.t.Helper()
	s := f.mustOpen()
	defer func() {
		if err := s.Close(); err != nil {
			f.t.Errorf("failed to close %s: %v", f.dbPath, err)
		}
	}()
	if err := s.Check(); err != nil {
		f.t.Fatalf("bbolt consistency check of %s failed: %v", f.dbPath, err)
	}
	var out []allocator.Allocation
	pool := allocator.Pools(f.config())[0].Key
	err := s.View(ctx, func(ctx context.Context, tx allocator.Txn) error {
		return tx.ForEach(ctx, pool, func(al allocator.Allocation) error {
			out = append(out, al)
			return nil
		})
	})
	if err != nil {
		f.t.Fatalf("failed to read pool %s: %v", pool, err)
	}
	return out
}

// parallel runs fn(i) for i in [0, n) at once and returns the errors by index.
func parallel(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	return errs
}

func containerID(prefix string, i int) string {
	return fmt.Sprintf("%s-%04d", prefix, i)
}

// assertUniqueInWindow asserts that addrs are pairwise distinct and inside [first, last].
func assertUniqueInWindow(t *testing.T, addrs map[string]netip.Addr, first, last netip.Addr) {
	t.Helper()
	holder := map[netip.Addr]string{}
	for id, a := range addrs {
		if a.Compare(first) < 0 || a.Compare(last) > 0 {
			t.Errorf("%s got %s, outside %s-%s", id, a, first, last)
		}
		if other, dup := holder[a]; dup {
			t.Errorf("%s and %s both got %s", other, id, a)
		}
		holder[a] = id
	}
}
