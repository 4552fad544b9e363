package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/netpool/netpool/test/harness"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// testOptions are the defaults with test-sized timings, no listeners and no leader election.
func testOptions() Options {
	o := DefaultOptions()
	o.MetricsBindAddress, o.HealthProbeBindAddress = "0", "0"
	o.LeaderElection = false
	o.GCGrace = time.Second
	o.SweepInterval = time.Hour
	o.SliceGrace = time.Second
	o.PoolStatusInterval = 50 * time.Millisecond
	o.QPS, o.Burst = 1000, 2000
	return o
}

// runningManager is a controller manager running in a goroutine of the test.
type runningManager struct {
	mgr    manager.Manager
	reg    *prometheus.Registry
	logs   *harness.SyncBuffer
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// mustStartManager starts a manager over cfg (env's admin config when nil) with opts, its own
// metrics registry unless opts names one, and a log kept in memory (printed if the test fails).
// The test's cleanup stops it.
func mustStartManager(t *testing.T, cfg *rest.Config, opts Options) *runningManager {
	t.Helper()
	if cfg == nil {
		cfg = env.Config
	}
	m := &runningManager{reg: prometheus.NewRegistry(), logs: &harness.SyncBuffer{}, done: make(chan error, 1)}
	log, err := NewLogger(m.logs, LogFormatText, "info")
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger = log
	if opts.Registerer == nil {
		opts.Registerer = m.reg
	}
	m.mgr, err = New(cfg, opts)
	if err != nil {
		t.Fatalf("creating the manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() { m.done <- m.mgr.Start(ctx) }()
	t.Cleanup(func() {
		m.stop(t)
		if t.Failed() {
			t.Logf("manager log:\n%s", m.logs.String())
		}
	})
	return m
}

// stop stops the manager (as a crash would when its options keep the Lease) and waits for it.
func (m *runningManager) stop(t *testing.T) {
	t.Helper()
	m.once.Do(func() {
		m.cancel()
		select {
		case err := <-m.done:
			if err != nil {
				t.Errorf("manager stopped with: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("manager did not stop within 30s")
		}
	})
}

// metric returns the value of the counter or gauge name of the manager's registry whose labels
// include labels; 0 when there is none.
func (m *runningManager) metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, mt := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range mt.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metrics
				}
			}
			if mt.GetCounter() != nil {
				return mt.GetCounter().GetValue()
			}
			return mt.GetGauge().GetValue()
		}
	}
	return 0
}

// releases returns netpool_gc_releases_total for reason.
func (m *runningManager) releases(t *testing.T, reason string, dryRun bool) float64 {
	t.Helper()
	return m.metric(t, "netpool_gc_releases_total", map[string]string{"reason": reason, "dry_run": fmt.Sprint(dryRun)})
}

// eventually polls check every 50ms until it returns nil, and fails the test with its last error
// if that does not happen within timeout.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// consistently polls check every 50ms for d and fails the test as soon as it returns an error.
func consistently(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exists is a check that obj exists (read directly from the API server).
func exists(obj client.Object) func() error {
	return func() error {
		return direct.Get(context.Background(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
	}
}

// gone is a check that obj no longer exists.
func gone(obj client.Object) func() error {
	return func() error {
		err := direct.Get(context.Background(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("%T %s still exists", obj, client.ObjectKeyFromObject(obj))
	}
}

// errExpected is the error of fakes that inject failures.
var errExpected = errors.New("injected failure")
