package derivedpool

import (
	"context"
	"fmt"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/netpool/netpool/controller/internal/clock"
	"github.com/netpool/netpool/controller/internal/index"
	"github.com/netpool/netpool/controller/internal/predicates"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/ippool"
)

// Reconciler removes the pools derived from NADs' inline ranges (ippool.IsDerived) that
// no NAD uses any more and that hold nothing: no reservation and no slice. A NAD's author makes the
// controller and the agents create a cluster-scoped object per inline range; without this, every
// NAD that ever existed would leave its pools behind.
//
// A pool younger than Grace stays, so that a pool an agent has just created for a call (whose
// reservation is still on its way, or whose NAD the cache has not seen) is never taken from under
// it. The delete is conditional on the pool's UID and resourceVersion, and reservations are
// checked on the API server right before it. An agent that still holds the pool in memory derives
// it again on its next call.
type Reconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// Live reads from the API server, for the last check before a delete.
	Live client.Reader
	// Grace is how old a derived pool must be before it may be removed.
	Grace time.Duration
	// Now is the clock; time.Now when nil.
	Now clock.Func
}

// SetupWithManager registers the reconciler: derived pools, the NADs that name them (before and
// after a change), and their reservations and slices.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Live == nil {
		return fmt.Errorf("derived pool reconciler: Client and Live are required")
	}
	derived := predicate.NewPredicateFuncs(func(o client.Object) bool { return ippool.IsDerived(o.(*ipamv1.IPPool)) })
	return ctrl.NewControllerManagedBy(mgr).
		Named("derived-pool-cleanup").
		For(&ipamv1.IPPool{}, builder.WithPredicates(derived)).
		Watches(&nadv1.NetworkAttachmentDefinition{}, nadPoolsHandler{}).
		Watches(&ipamv1.OverlappingRangeIPReservation{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return poolRequests(index.ReservationPools(o))
		}), builder.WithPredicates(predicates.DeletedOnly())).
		Watches(&ipamv1.IPPoolSlice{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return poolRequests(index.SlicePools(o))
		}), builder.WithPredicates(predicates.DeletedOnly())).
		Complete(r)
}

// +kubebuilder:rbac:groups=ipam.netpool.io,resources=ippools,verbs=get;list;watch;delete

// Reconcile removes one derived pool when nothing uses it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &ipamv1.IPPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to get IPPool %s: %w", req.Name, err)
	}
	if !ippool.IsDerived(pool) || pool.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	if age := r.Now.Now().Sub(pool.CreationTimestamp.Time); age < r.Grace {
		return ctrl.Result{RequeueAfter: r.Grace - age}, nil
	}
	used, err := r.inUse(ctx, pool.Name)
	if err != nil || used != "" {
		return ctrl.Result{}, err // an event of what uses it brings the pool back
	}
	var held ipamv1.OverlappingRangeIPReservationList
	if err := r.Live.List(ctx, &held, client.MatchingLabels{ipamv1.PoolLabel: ipamv1.LabelValue(pool.Name)}, client.Limit(1)); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to list the reservations of IPPool %s: %w", pool.Name, err)
	}
	if len(held.Items) > 0 {
		return ctrl.Result{}, nil
	}
	logf.FromContext(ctx).Info("Deleting a derived pool no NAD uses and that holds nothing", "pool", pool.Name, "range", pool.Spec.Range)
	err = r.Client.Delete(ctx, pool, client.Preconditions{UID: &pool.UID, ResourceVersion: &pool.ResourceVersion})
	switch {
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, nil
	case apierrors.IsConflict(err):
		return ctrl.Result{}, nil // it changed since the cache saw it: its update event judges it again
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("failed to delete IPPool %s: %w", pool.Name, err)
	}
	return ctrl.Result{}, nil
}

// inUse names what still uses pool in the cache (a NAD, a reservation or a slice), or returns "".
func (r *Reconciler) inUse(ctx context.Context, pool string) (string, error) {
	var nads nadv1.NetworkAttachmentDefinitionList
	if err := r.Client.List(ctx, &nads, client.MatchingFields{index.NADPool: pool}, client.Limit(1)); err != nil {
		return "", fmt.Errorf("failed to list the NADs of IPPool %s: %w", pool, err)
	}
	if len(nads.Items) > 0 {
		return "NAD " + nads.Items[0].Namespace + "/" + nads.Items[0].Name, nil
	}
	var res ipamv1.OverlappingRangeIPReservationList
	if err := r.Client.List(ctx, &res, client.MatchingFields{index.ReservationPool: pool}, client.Limit(1)); err != nil {
		return "", fmt.Errorf("failed to list the reservations of IPPool %s: %w", pool, err)
	}
	if len(res.Items) > 0 {
		return "reservation " + res.Items[0].Name, nil
	}
	var slices ipamv1.IPPoolSliceList
	if err := r.Client.List(ctx, &slices, client.MatchingFields{index.SlicePool: pool}, client.Limit(1)); err != nil {
		return "", fmt.Errorf("failed to list the slices of IPPool %s: %w", pool, err)
	}
	if len(slices.Items) > 0 {
		return "slice " + slices.Items[0].Name, nil
	}
	return "", nil
}

// poolRequests are reconcile requests for pools by name.
func poolRequests(names []string) []reconcile.Request {
	reqs := make([]reconcile.Request, 0, len(names))
	for _, n := range names {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
	}
	return reqs
}

// nadPoolsHandler enqueues the pools a NAD names, before and after an update: a pool the new
// config no longer names may have lost its last user.
type nadPoolsHandler struct{}

type poolQueue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func (nadPoolsHandler) Create(_ context.Context, e event.CreateEvent, q poolQueue) {}

func (nadPoolsHandler) Update(_ context.Context, e event.UpdateEvent, q poolQueue) {
	add(q, index.NADPools(e.ObjectOld))
	add(q, index.NADPools(e.ObjectNew))
}

func (nadPoolsHandler) Delete(_ context.Context, e event.DeleteEvent, q poolQueue) {
	add(q, index.NADPools(e.Object))
}

func (nadPoolsHandler) Generic(_ context.Context, e event.GenericEvent, q poolQueue) {}

func add(q poolQueue, names []string) {
	for _, r := range poolRequests(names) {
		q.Add(r)
	}
}
