package controller

import (
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/harness"
)

// The controller's own tests run the whole manager (New), as cmd/netpool-controller does: its
// wiring, options, health and metrics, leader election and RBAC. Each reconciler's stories are
// tested in its package under internal/.

func TestMain(m *testing.M) { os.Exit(envtest.RunShared(m.Run)) }

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

// mustStartManager starts the controller's manager over cfg (the shared Env's admin config when
// nil) with opts, its own metrics registry unless opts names one, and a log kept in memory
// (printed if the test fails). The test's cleanup stops it.
func mustStartManager(t *testing.T, cfg *rest.Config, opts Options) *ctrltest.Manager {
	t.Helper()
	if cfg == nil {
		cfg = ctrltest.SharedEnv(t).Config
	}
	logs, reg := &harness.SyncBuffer{}, prometheus.NewRegistry()
	log, err := NewLogger(logs, LogFormatText, "info")
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger = log
	if opts.Registerer == nil {
		opts.Registerer = reg
	}
	mgr, err := New(cfg, opts)
	if err != nil {
		t.Fatalf("creating the manager: %v", err)
	}
	return ctrltest.Run(t, mgr, reg, logs)
}
