package nad

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/netpool/netpool/controller/internal/index"
)

// CRDName is the CustomResourceDefinition of Multus' NetworkAttachmentDefinition.
const CRDName = "network-attachment-definitions.k8s.cni.cncf.io"

// nadCRDPoll is how often the controller asks the API server whether the NAD CRD is served, while it
// is not: one discovery request per replica, until an operator installs Multus.
const nadCRDPoll = 2 * time.Second

// nadCRDLogEvery is how often the wait is logged again after the first message.
const nadCRDLogEvery = time.Minute

// errNADCRDMissing is what /readyz answers while the NAD CRD is not served.
var errNADCRDMissing = errors.New("the NetworkAttachmentDefinition CRD (" + CRDName + ", version v1) is not installed: " +
	"install Multus' CRD; the NAD reconciler starts when it is served")

// Gate starts the NAD reconciler once the NetworkAttachmentDefinition CRD is served. Without the
// gate a missing CRD stops the manager at start-up, which in a cluster is a CrashLoopBackOff that
// takes the pool status, GC and node reclaim down with it; with it, everything else runs, the wait
// is logged, and /readyz fails until the CRD appears. It runs in every replica (readiness is per
// replica); the reconciler it adds runs only in the leader, as every reconciler does.
type Gate struct {
	// discovery asks the API server which resources it serves.
	discovery discovery.DiscoveryInterface
	// setup registers the NAD index and reconciler with the manager; it is retried at the next
	// poll when it fails (the manager's REST mapper may learn of the CRD a moment later).
	setup func(context.Context) error
	// log receives the wait and the start.
	log logr.Logger

	// started is set once setup succeeded.
	started atomic.Bool
}

var _ manager.LeaderElectionRunnable = &Gate{}

// Start polls until the CRD is served and setup succeeds, or ctx ends.
func (g *Gate) Start(ctx context.Context) error {
	log := g.log.WithValues("crd", CRDName)
	var lastLog time.Time
	for {
		err := g.try(ctx)
		if err == nil {
			log.Info("Starting the NAD reconciler: the NetworkAttachmentDefinition CRD is served")
			return nil
		}
		if time.Since(lastLog) >= nadCRDLogEvery {
			log.Info("Waiting for the NetworkAttachmentDefinition CRD: install Multus' CRD; "+
				"NADs are not checked and their inline pools not created until then, and /readyz fails",
				"reason", err.Error())
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(nadCRDPoll):
		}
	}
}

// try reports why the NAD reconciler cannot start yet, or starts it.
func (g *Gate) try(ctx context.Context) error {
	if err := nadCRDServed(g.discovery); err != nil {
		return err
	}
	if err := g.setup(ctx); err != nil {
		return err
	}
	g.started.Store(true)
	return nil
}

// NeedLeaderElection is false: every replica reports its own readiness.
func (g *Gate) NeedLeaderElection() bool { return false }

// Checker is the /readyz check: not ready until the NAD reconciler is set up.
func (g *Gate) Checker() healthz.Checker {
	return func(*http.Request) error {
		if !g.started.Load() {
			return errNADCRDMissing
		}
		return nil
	}
}

// nadCRDServed returns nil when the API server serves network-attachment-definitions in
// k8s.cni.cncf.io/v1, and otherwise says what is missing.
func nadCRDServed(d discovery.DiscoveryInterface) error {
	gv := nadv1.SchemeGroupVersion.String()
	list, err := d.ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("the API server does not serve %s", gv)
	}
	if err != nil {
		return fmt.Errorf("failed to discover %s: %w", gv, err)
	}
	for _, r := range list.APIResources {
		if r.Name == "network-attachment-definitions" {
			return nil
		}
	}
	return fmt.Errorf("the API server serves %s but not network-attachment-definitions", gv)
}

// NewGate returns the gate that registers the NAD indexes and r with mgr once the NAD CRD is
// served.
func NewGate(mgr manager.Manager, r *Reconciler) (*Gate, error) {
	d, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("failed to create the discovery client: %w", err)
	}
	var indexed bool
	setup := func(ctx context.Context) error {
		if !indexed {
			if err := index.Setup(ctx, mgr.GetFieldIndexer(), index.NAD()); err != nil {
				return err
			}
			indexed = true
		}
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("failed to set up %T: %w", r, err)
		}
		return nil
	}
	return &Gate{discovery: d, setup: setup, log: mgr.GetLogger().WithName("nad-crd")}, nil
}
