package gc

import (
	"context"
	"fmt"
	"time"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/netpool/netpool/controller/internal/clock"
	"github.com/netpool/netpool/controller/internal/index"
	"github.com/netpool/netpool/controller/internal/metrics"
	"github.com/netpool/netpool/controller/internal/predicates"
	"github.com/netpool/netpool/controller/internal/release"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/gcpolicy"
	"github.com/netpool/netpool/internal/kubeclient/crclient"
)

// Reconciler releases leaked reservations (package gcpolicy is the policy). It judges a
// reservation when it appears (at start, every existing one: the sweep after a downtime), when
// its pod changes in a way that matters (deleted, recreated, finished, network-status written),
// when it becomes old enough to judge, and on every periodic sweep.
//
// The cache decides cheaply that a reservation looks leaked; the API server then has the last
// word: the pod is read live and judged again before anything is released, so a cache that lags
// (a pod created a moment ago, a network-status just written) never releases a live address.
type Reconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// Live reads from the API server.
	Live client.Reader
	// Metrics counts sweeps.
	Metrics *metrics.Metrics
	// Grace: reservations younger than this are never released.
	Grace time.Duration
	// SweepInterval is how often every reservation is queued again.
	SweepInterval time.Duration
	// Workers is how many reservations are judged at once.
	Workers int
	// Now is the clock; time.Now when nil.
	Now clock.Func
	// Release releases (or, in a dry run, reports) what the GC found leaked.
	Release *release.Releaser
	// claimsWatched is set by SetupWithManager when the IPAMClaim CRD is served: a claim's
	// deletion then queues its reservations at once, and the cache answers for claims. Without
	// it, claims are read live and a deleted claim's address goes at the next sweep.
	claimsWatched bool
}

// SetupWithManager registers the reconciler with its sources: reservations, pods, StatefulSets
// (deleted or scaled down: their sticky addresses), IPAMClaims when served, and the periodic sweep.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Live == nil || r.Metrics == nil || r.Release == nil {
		return fmt.Errorf("reservation GC: Client, Live, Metrics and Release are required")
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("reservation-gc").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Workers}).
		Watches(&ipamv1.OverlappingRangeIPReservation{}, &handler.EnqueueRequestForObject{},
			builder.WithPredicates(predicates.CreatedOnly())).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.reservationsOfPod),
			builder.WithPredicates(podChangedForGC())).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(r.reservationsOfStatefulSet),
			builder.WithPredicates(statefulSetShrunk())).
		WatchesRawSource(sweepSource(r.Client, r.SweepInterval, r.Metrics))
	if _, err := mgr.GetRESTMapper().RESTMapping(ipamClaimKind); err == nil {
		r.claimsWatched = true
		b = b.Watches(&ipamclaimsv1.IPAMClaim{}, handler.EnqueueRequestsFromMapFunc(r.reservationsOfClaim),
			builder.WithPredicates(predicates.DeletedOnly()))
	}
	return b.Complete(r)
}

// +kubebuilder:rbac:groups=ipam.netpool.io,resources=overlappingrangeipreservations,verbs=get;list;watch;delete;update
// +kubebuilder:rbac:groups=ipam.netpool.io,resources=ippools,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=k8s.cni.cncf.io,resources=ipamclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile judges one reservation, and releases it when it leaked.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res := &ipamv1.OverlappingRangeIPReservation{}
	if err := r.Client.Get(ctx, req.NamespacedName, res); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to get reservation %s: %w", req.Name, err)
	}
	if !gcpolicy.Judgeable(res) {
		return ctrl.Result{}, nil // being deleted, or no pod identity to judge by
	}
	var cached client.Reader = r.Client
	if res.Spec.Owner != nil && res.Spec.Owner.Kind == ipamv1.OwnerIPAMClaim && !r.claimsWatched {
		cached = r.Live
	}
	facts, err := gcpolicy.Read(ctx, crclient.Reader(cached), res)
	if err != nil {
		return ctrl.Result{}, err
	}
	v := gcpolicy.Judge(res, facts, r.Now.Now(), r.Grace)
	if v.Reason == "" && len(gcpolicy.StaleUsers(res, facts)) == 0 {
		return r.keep(ctx, res, v), nil
	}
	// The API server has the last word: the reservation as it is now (a pod may have been bound to
	// it since the cache saw it), and its owner's and pods' facts.
	if err := r.Live.Get(ctx, req.NamespacedName, res); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to get reservation %s: %w", req.Name, err)
	}
	if !gcpolicy.Judgeable(res) {
		return ctrl.Result{}, nil
	}
	if facts, err = gcpolicy.Read(ctx, crclient.Reader(r.Live), res); err != nil {
		return ctrl.Result{}, err
	}
	if v = gcpolicy.Judge(res, facts, r.Now.Now(), r.Grace); v.Reason != "" {
		return ctrl.Result{}, r.Release.Release(ctx, res, v.Reason, v.Detail, facts.Pod)
	}
	if stale := gcpolicy.StaleUsers(res, facts); len(stale) > 0 {
		// The judgement already counted them as unbound, so removing them changes no verdict; a
		// reservation changed since it was read is left for its next judgement.
		if _, err := r.Release.Prune(ctx, res, stale); err != nil {
			return ctrl.Result{}, err
		}
	}
	return r.keep(ctx, res, v), nil
}

// keep ends the reconcile of a reservation that stays.
func (r *Reconciler) keep(ctx context.Context, res *ipamv1.OverlappingRangeIPReservation, v gcpolicy.Verdict) ctrl.Result {
	switch {
	case v.Detail != "":
		logf.FromContext(ctx).Info("Keeping a reservation whose pod cannot be judged", "reservation", res.Name,
			"podRef", res.Spec.PodRef, "detail", v.Detail)
	case v.Bound != "":
		// Its pods' DEL or deletion comes as a pod event; the sweep covers a lost one.
		logf.FromContext(ctx).V(1).Info("Keeping a reservation whose owner is gone while pods are bound to it", "reservation", res.Name,
			"address", res.Spec.Address, "bound", v.Bound)
	}
	return ctrl.Result{RequeueAfter: v.Recheck}
}

// reservationsOfPod maps a pod event to the reservations that name a pod of that name: as holder,
// or as a user of a persistently owned address.
func (r *Reconciler) reservationsOfPod(ctx context.Context, obj client.Object) []reconcile.Request {
	var list ipamv1.OverlappingRangeIPReservationList
	ref := obj.GetNamespace() + "/" + obj.GetName()
	if err := r.Client.List(ctx, &list, client.MatchingFields{index.ReservationPod: ref}, client.UnsafeDisableDeepCopy); err != nil {
		// The cache answers from memory; the periodic sweep covers what an error here would miss.
		logf.FromContext(ctx).Error(err, "Listing the reservations of a pod failed", "podRef", ref)
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}}
	}
	return reqs
}
