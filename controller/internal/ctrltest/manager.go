package ctrltest

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/netpool/netpool/controller/internal/index"
	"github.com/netpool/netpool/controller/internal/metrics"
	"github.com/netpool/netpool/controller/internal/recorder"
	"github.com/netpool/netpool/controller/internal/release"
	"github.com/netpool/netpool/controller/internal/slim"
	"github.com/netpool/netpool/internal/scheme"
	"github.com/netpool/netpool/test/harness"
)

// Options are what the reconcilers under test are configured with: the part of the controller's
// Options they read.
type Options struct {
	// GCGrace: reservations younger than this are never released; nodes must be gone this long.
	GCGrace time.Duration
	// SweepInterval is how often the GC judges every reservation again.
	SweepInterval time.Duration
	// GCWorkers is how many reservations the GC judges at once.
	GCWorkers int
	// DryRun reports leaks without releasing them.
	DryRun bool
	// SliceGrace is how long a slice stays empty before it goes back.
	SliceGrace time.Duration
	// PoolStatusInterval is the shortest time between two status writes of one pool.
	PoolStatusInterval time.Duration
	// Now is the reconcilers' clock; time.Now when nil.
	Now func() time.Time
}

// TestOptions are test-sized timings: a second's grace, no sweep within a test unless it asks, and
// the controller's eight GC workers.
func TestOptions() Options {
	return Options{
		GCGrace:            time.Second,
		SweepInterval:      time.Hour,
		GCWorkers:          8,
		SliceGrace:         time.Second,
		PoolStatusInterval: 50 * time.Millisecond,
	}
}

// Deps are what a test's manager gives the reconcilers under test.
type Deps struct {
	Mgr manager.Manager
	// Metrics are registered with the manager's own registry.
	Metrics *metrics.Metrics
	// Recorder records Events as the controller's does.
	Recorder events.EventRecorder
	// Release is the releaser over Metrics and Recorder (a dry run when Options.DryRun).
	Release *release.Releaser
	Options Options
}

// eventSource is the reporting controller named on every Event, as the controller names it.
const eventSource = "netpool-controller"

// StartManager starts a manager over cfg (the shared Env's admin config when nil) with the
// controller's scheme, informer cache and field indexes, no listeners and no leader election, its
// own metrics registry and a log kept in memory (printed if the test fails); setup registers the
// reconcilers under test. The test's cleanup stops it.
func StartManager(t *testing.T, cfg *rest.Config, opts Options, setup func(Deps) error) *Manager {
	t.Helper()
	if cfg == nil {
		cfg = SharedEnv(t).Config
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	logs := &harness.SyncBuffer{}
	reg := prometheus.NewRegistry()
	kinds, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 kinds,
		Logger:                 Logger(logs),
		Cache:                  slim.CacheOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Tests run many managers in one process; their controllers' names repeat.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("creating the manager: %v", err)
	}
	if err := index.Setup(context.Background(), mgr.GetFieldIndexer(), index.All()); err != nil {
		t.Fatal(err)
	}
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	rec := recorder.Truncating{EventRecorder: mgr.GetEventRecorder(eventSource), Log: mgr.GetLogger().WithName("events")}
	deps := Deps{
		Mgr: mgr, Metrics: m, Recorder: rec, Options: opts,
		Release: &release.Releaser{Client: mgr.GetClient(), Recorder: rec, Metrics: m, DryRun: opts.DryRun},
	}
	if err := setup(deps); err != nil {
		t.Fatalf("setting up the reconcilers: %v", err)
	}
	return Run(t, mgr, reg, logs)
}

// Logger is a text logger writing to w, as the controller's --log-format text.
func Logger(w *harness.SyncBuffer) logr.Logger {
	return logr.FromSlogHandler(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// Manager is a controller manager running in a goroutine of the test.
type Manager struct {
	Mgr manager.Manager
	// Reg is the registry of the manager's netpool metrics.
	Reg *prometheus.Registry
	// Logs is what the manager logged.
	Logs   *harness.SyncBuffer
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// Run runs mgr, which logs to logs and registers its netpool metrics with reg, until the test
// ends (or Stop), and prints its log if the test failed.
func Run(t *testing.T, mgr manager.Manager, reg *prometheus.Registry, logs *harness.SyncBuffer) *Manager {
	t.Helper()
	m := &Manager{Mgr: mgr, Reg: reg, Logs: logs, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() { m.done <- m.Mgr.Start(ctx) }()
	t.Cleanup(func() {
		m.Stop(t)
		if t.Failed() {
			t.Logf("manager log:\n%s", m.Logs.String())
		}
	})
	return m
}

// Stop stops the manager (as a crash would when its options keep the Lease) and waits for it.
func (m *Manager) Stop(t *testing.T) {
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

// Metric returns the value of the counter or gauge name of the manager's registry whose labels
// include labels; 0 when there is none.
func (m *Manager) Metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := m.Reg.Gather()
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

// Releases returns netpool_gc_releases_total for reason.
func (m *Manager) Releases(t *testing.T, reason string, dryRun bool) float64 {
	t.Helper()
	return m.Metric(t, "netpool_gc_releases_total", map[string]string{"reason": reason, "dry_run": fmt.Sprint(dryRun)})
}

// Done is the manager's end: Start's error, once it returned.
func (m *Manager) Done() <-chan error { return m.done }
