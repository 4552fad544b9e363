package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

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
		Cache:                         cacheOptions(),
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
	m, err := NewMetrics(reg)
	if err != nil {
		return err
	}
	if err := setupIndexes(context.Background(), mgr.GetFieldIndexer(), baseIndexes()); err != nil {
		return err
	}
	recorder := truncatingRecorder{EventRecorder: mgr.GetEventRecorder(eventSource), log: mgr.GetLogger().WithName("events")}
	rel := &releaser{client: mgr.GetClient(), recorder: recorder, metrics: m, dryRun: opts.DryRun}
	reconcilers := []interface{ SetupWithManager(ctrl.Manager) error }{
		&poolStatusReconciler{
			Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Recorder: recorder, Metrics: m,
			Interval: opts.PoolStatusInterval, Now: opts.Now,
		},
		&gcReconciler{
			Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Metrics: m, Release: rel,
			Grace: opts.GCGrace, SweepInterval: opts.SweepInterval, Workers: opts.GCWorkers, Now: opts.Now,
		},
		&nodeReconciler{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Release: rel, Grace: opts.GCGrace, Now: opts.Now},
		&sliceReconciler{Client: mgr.GetClient(), Release: rel, Grace: opts.SliceGrace, Now: opts.Now},
		&egressRouterReconciler{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Recorder: recorder, Image: opts.EgressRouterImage, Workers: egressWorkers},
		&derivedPoolReconciler{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Grace: opts.GCGrace, Now: opts.Now},
	}
	for _, r := range reconcilers {
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("failed to set up %T: %w", r, err)
		}
	}
	gate, err := newNADGate(mgr, &nadReconciler{Client: mgr.GetClient(), Recorder: recorder})
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
	if err := mgr.AddReadyzCheck("nad-crd", gate.checker()); err != nil {
		return fmt.Errorf("failed to add the NAD CRD readiness check: %w", err)
	}
	return nil
}

// newNADGate returns the gate that registers the NAD indexes and nad with mgr once the NAD CRD is
// served.
func newNADGate(mgr manager.Manager, nad *nadReconciler) (*nadGate, error) {
	d, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("failed to create the discovery client: %w", err)
	}
	var indexed bool
	setup := func(ctx context.Context) error {
		if !indexed {
			if err := setupIndexes(ctx, mgr.GetFieldIndexer(), nadIndexes()); err != nil {
				return err
			}
			indexed = true
		}
		if err := nad.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("failed to set up %T: %w", nad, err)
		}
		return nil
	}
	return &nadGate{discovery: d, setup: setup, log: mgr.GetLogger().WithName("nad-crd")}, nil
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
