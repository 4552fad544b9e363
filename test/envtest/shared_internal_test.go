package envtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// The tests of this file use a sharedEnv of their own, so they leave the binary's alone.

// TestSharedNeedsRunShared: without RunShared nothing would stop the Env, so Shared refuses to
// start one.
func TestSharedNeedsRunShared(t *testing.T) {
	t.Parallel()
	var s sharedEnv
	tb := &fatalTB{TB: t}
	tb.run(func() { s.get(tb) })
	wantErr(t, tb.err, "envtest.Shared needs the test binary's TestMain to run the tests through envtest.RunShared")
	if s.env != nil {
		t.Fatal("Shared started an Env without RunShared")
	}
}

// TestRunSharedStartsOnceAndStops: every Shared call of a run gets the same Env, started on the
// first; RunShared stops it and removes its directory afterwards, and returns the tests' code.
func TestRunSharedStartsOnceAndStops(t *testing.T) {
	t.Parallel()
	var s sharedEnv
	if code := s.run(func() int { return 3 }); code != 3 || s.env != nil {
		t.Fatalf("RunShared without Shared = %d (env %v), want the tests' 3 and no Env", code, s.env)
	}

	var first, second *Env
	code := s.run(func() int {
		first, second = s.get(t), s.get(t)
		return 0
	})
	if code != 0 {
		t.Fatalf("RunShared = %d, want 0", code)
	}
	if first == nil || first != second {
		t.Fatalf("Shared returned %p and %p, want one Env", first, second)
	}
	if len(first.CRDs) != 4 {
		t.Errorf("the shared Env installed %d CRDs, want 4 (netpool's three kinds and EgressRouter)", len(first.CRDs))
	}
	if !first.stopped {
		t.Error("RunShared left the shared Env running")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := first.Client.List(ctx, &ipamv1.IPPoolList{}); err == nil {
		t.Error("the shared API server still answers after RunShared")
	}
	if _, err := os.Stat(first.Kubeconfig); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the shared Env's directory is left: %v", err)
	}
	if s.running || s.env != nil {
		t.Error("RunShared left Shared usable after the run")
	}
	tb := &fatalTB{TB: t}
	tb.run(func() { s.get(tb) })
	wantErr(t, tb.err, "envtest.Shared needs the test binary's TestMain")
}

// fatalTB records Fatalf and ends the goroutine, as testing's Fatalf ends a test.
type fatalTB struct {
	testing.TB
	err error
}

func (f *fatalTB) Helper()             {}
func (f *fatalTB) Logf(string, ...any) {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.err = fmt.Errorf(format, args...)
	runtime.Goexit()
}

// run calls fn in a goroutine of its own and waits for it.
func (f *fatalTB) run(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
}
