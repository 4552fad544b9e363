package envtest

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// shared is the Env of Shared and RunShared: one per test binary.
var shared sharedEnv

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
	return shared.get(t)
}

// RunShared runs the tests (run is testing.M's Run, or a wrapper of it) with Shared available, then
// stops the shared Env if a test started it and removes its directory. It returns run's exit code,
// or 1 if stopping failed.
func RunShared(run func() int) int { return shared.run(run) }

// sharedEnv is an Env started by the first get and stopped when run ends.
type sharedEnv struct {
	mu sync.Mutex
	// running is set while run runs the tests; get refuses to start an Env that nothing would stop.
	running bool
	env     *Env
	// err is why the start failed; every later get fails with it rather than trying again.
	err error
	// dir holds env's data, certificates and kubeconfig; run removes it.
	dir string
}

func (s *sharedEnv) get(t testing.TB) *Env {
	t.Helper()
	SkipShort(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		t.Fatalf("envtest.Shared needs the test binary's TestMain to run the tests through envtest.RunShared")
	}
	if s.env == nil && s.err == nil {
		s.env, s.dir, s.err = startShared()
		if s.err == nil {
			t.Logf("envtest: shared kube-apiserver at %s started in %s", s.env.Config.Host, s.env.StartDuration.Round(time.Millisecond))
		}
	}
	if s.err != nil {
		t.Fatalf("starting the shared envtest: %v", s.err)
	}
	return s.env
}

func (s *sharedEnv) run(run func() int) int {
	s.mu.Lock()
	s.running = true
	s.mu.Unlock()
	code := run()
	if err := s.stop(); err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// stop stops the Env, if one was started, removes its directory and forgets it.
func (s *sharedEnv) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = false
	e, dir := s.env, s.dir
	s.env, s.dir, s.err = nil, "", nil
	if e == nil {
		return nil
	}
	return errors.Join(e.Stop(), os.RemoveAll(dir))
}

// startShared starts an Env in a temporary directory of its own.
func startShared() (*Env, string, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, "", fmt.Errorf("finding the checkout: %w", err)
	}
	dir, err := os.MkdirTemp("", "netpool-envtest-")
	if err != nil {
		return nil, "", fmt.Errorf("failed to create the shared envtest directory: %w", err)
	}
	e, err := start(dir, root, DefaultModule, crdDir(root))
	if err != nil {
		return nil, "", errors.Join(err, os.RemoveAll(dir))
	}
	return e, dir, nil
}
