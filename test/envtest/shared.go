package envtest

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// shared is the Env of Shared: one per test binary, started by the first test that asks for it
// and stopped by RunShared once every test has run.
var shared struct {
	mu sync.Mutex
	// running is set by RunShared while the tests run; Shared refuses to start an Env that
	// nothing would stop.
	running bool
	env     *Env
	// err is why the start failed; every later Shared fails with it rather than trying again.
	err error
	dir string
}

// Shared returns the kube-apiserver and etcd that the tests of this test binary share, starting it
// on the first call (a start costs seconds; a binary whose tests all share one pays it once). The
// binary's TestMain must run its tests through RunShared, which stops it at the end:
//
//	func TestMain(m *testing.M) { os.Exit(envtest.RunShared(m.Run)) }
//
// Tests that share an Env see each other's objects and may run in parallel, so each uses names of
// its own (pools, ranges, networks, namespaces) and never lists more than its own. A test that
// stops, restarts or crashes the control plane must use Start instead.
func Shared(t testing.TB) *Env {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.running {
		t.Fatalf("envtest.Shared needs the test binary's TestMain to run the tests through envtest.RunShared")
	}
	if shared.env == nil && shared.err == nil {
		shared.env, shared.dir, shared.err = startShared()
		if shared.err == nil {
			t.Logf("envtest: shared kube-apiserver at %s started in %s", shared.env.Config.Host, shared.env.StartDuration.Round(time.Millisecond))
		}
	}
	if shared.err != nil {
		t.Fatalf("starting the shared envtest: %v", shared.err)
	}
	return shared.env
}

// startShared starts an Env in a temporary directory of its own, which stopShared removes.
func startShared() (*Env, string, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, "", fmt.Errorf("finding the checkout: %w", err)
	}
	dir, err := os.MkdirTemp("", "netpool-envtest-")
	if err != nil {
		return nil, "", fmt.Errorf("failed to create the shared envtest directory: %w", err)
	}
	e, err := start(dir, root, crdDir(root))
	if err != nil {
		return nil, "", errors.Join(err, os.RemoveAll(dir))
	}
	return e, dir, nil
}

// RunShared runs the tests (run is testing.M's Run, or a wrapper of it) with Shared available, then
// stops the shared Env if a test started it and removes its directory. It returns run's exit code,
// or 1 if stopping failed.
func RunShared(run func() int) int {
	shared.mu.Lock()
	shared.running = true
	shared.mu.Unlock()
	code := run()
	if err := stopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// stopShared stops the shared Env, if one was started, and forgets it.
func stopShared() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.running = false
	e, dir := shared.env, shared.dir
	shared.env, shared.dir, shared.err = nil, "", nil
	if e == nil {
		return nil
	}
	return errors.Join(e.Stop(), os.RemoveAll(dir))
}
