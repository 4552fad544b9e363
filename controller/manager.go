package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/netpool/netpool/controller/internal/clock"
	"github.com/netpool/netpool/controller/internal/derivedpool"
	"github.com/netpool/netpool/controller/internal/egressrouter"
	"github.com/netpool/netpool/controller/internal/gc"
	"github.com/netpool/netpool/controller/internal/index"
	"github.com/netpool/netpool/controller/internal/metrics"
	"github.com/netpool/netpool/controller/internal/nad"
	"github.com/netpool/netpool/controller/internal/node"
	"github.com/netpool/netpool/controller/internal/poolstatus"
	"github.com/netpool/netpool/controller/internal/recorder"
	"github.com/netpool/netpool/controller/internal/release"
	"github.com/netpool/netpool/controller/internal/slice"
	"github.com/netpool/netpool/controller/internal/slim"
	"github.com/netpool/netpool/internal/scheme"
)

// eventSource is the reporting controller named on every Event.
const eventSource = "netpool-controller"

// readyTimeout bounds how long /readyz waits for the cache.
const readyTimeout = time.Second

// Run builds the manager and runs it until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	mgr, err := New(cfg, opts)
	if err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("failed to run the controller manager: %w", err)
	}
	return nil
}

// Leader election keeps a Lease in its namespace and records its transitions as core Events.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=netpool-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// New builds the controller's manager over the API server cfg points at, with every reconciler,
// index, metric and health check registered. Start runs it; the reconcilers run only while it
// holds the leader Lease (when LeaderElection is on), while its cache, /metrics, /healthz and
// /readyz run in every replica.
func New(cfg *rest.Config, opts Options) (manager.Manager, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(opts.QPS), opts.Burst
	if cfg.UserAgent == "" {
		cfg.UserAgent = eventSource
	}
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        s,
		Logger:                        opts.Logger,
		Cache:                         slim.CacheOptions(),
		Metrics:                       metricsserver.Options{BindAddress: opts.MetricsBindAddress},
		HealthProbeBindAddress:        opts.HealthProbeBindAddress,
		LeaderElection:                opts.LeaderElection,
		LeaderElectionID:              opts.LeaderElectionID,
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaseDuration:                 ptr.To(opts.LeaseDuration),
		RenewDeadline:                 ptr.To(opts.RenewDeadline),
		RetryPeriod:                   ptr.To(opts.RetryPeriod),
		LeaderElectionReleaseOnCancel: opts.ReleaseLeaseOnStop,
		// Controller names are unique within this manager by construction; the process-wide check
		// would only stop tests that run two managers (leader election) in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create the controller manager: %w", err)
	}
	if err := setup(mgr, opts); err != nil {
		return nil, err
	}
	return mgr, nil
}

// setup registers the indexes, metrics, reconcilers and health checks with mgr.
func setup(mgr manager.Manager, opts Options) error {
	reg := opts.Registerer
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	m, err := metrics.New(reg)
	if err != nil {
		return err
	}
	if err := index.Setup(context.Background(), mgr.GetFieldIndexer(), index.Base()); err != nil {
		return err
	}
	rec := recorder.Truncating{EventRecorder: mgr.GetEventRecorder(eventSource), Log: mgr.GetLogger().WithName("events")}
	rel := &release.Releaser{Client: mgr.GetClient(), Recorder: rec, Metrics: m, DryRun: opts.DryRun}
	now := clock.Func(opts.Now)
	reconcilers := []interface{ SetupWithManager(ctrl.Manager) error }{
		&poolstatus.Reconciler{
			Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Recorder: rec, Metrics: m,
			Interval: opts.PoolStatusInterval, Fanout: opts.PoolStatusFanout, Now: now,
		},
		&gc.Reconciler{
			Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Metrics: m, Release: rel,
			Grace: opts.GCGrace, SweepInterval: opts.SweepInterval, Workers: opts.GCWorkers, Now: now,
		},
		&node.Reconciler{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Release: rel, Grace: opts.GCGrace, Now: now},
		&slice.Reconciler{Client: mgr.GetClient(), Release: rel, Grace: opts.SliceGrace, Now: now},
		&egressrouter.Reconciler{
			Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Recorder: rec, Image: opts.EgressRouterImage,
			Workers: egressrouter.DefaultWorkers,
		},
		&derivedpool.Reconciler{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Grace: opts.GCGrace, Now: now},
	}
	for _, r := range reconcilers {
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("failed to set up %T: %w", r, err)
		}
	}
	gate, err := nad.NewGate(mgr, &nad.Reconciler{Client: mgr.GetClient(), Recorder: rec})
	if err != nil {
		return err
	}
	if err := mgr.Add(gate); err != nil {
		return fmt.Errorf("failed to add the NAD CRD gate: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("failed to add the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("cache", cacheSynced(mgr)); err != nil {
		return fmt.Errorf("failed to add the readiness check: %w", err)
	}
	if err := mgr.AddReadyzCheck("nad-crd", gate.Checker()); err != nil {
		return fmt.Errorf("failed to add the NAD CRD readiness check: %w", err)
	}
	return nil
}

// cacheSynced is ready once the informer cache has synced: before that, a replica that became
// leader would judge pools and reservations against an empty cache.
func cacheSynced(mgr manager.Manager) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), readyTimeout)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("the informer cache has not synced")
		}
		return nil
	}
}
