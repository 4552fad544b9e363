package slice

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
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
	"github.com/netpool/netpool/controller/internal/release"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/gcpolicy"
)

// Reconciler gives a slice back to its pool (deletes it) once it has held no reservation of
// its node for Grace. The agent gives idle blocks back itself while it holds another; this covers a
// node's last block and an agent that died. A slice only steers where a node looks for addresses
// (the reservation is the lock), so a slice deleted just as its node allocates from it costs a
// retry, never a duplicate.
//
// The time a slice was found empty is kept in memory: after a restart the wait starts again,
// which errs on keeping slices.
type Reconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// Release deletes the slice and reports it.
	Release *release.Releaser
	// Grace is how long a slice must stay empty.
	Grace time.Duration
	// Now is the clock; time.Now when nil.
	Now clock.Func

	mu sync.Mutex
	// emptySince is when each slice (by name) was first found empty, with its UID.
	emptySince map[string]emptyMark
}

// emptyMark records when a slice incarnation was first found empty.
type emptyMark struct {
	uid   types.UID
	since time.Time
}

// SetupWithManager registers the reconciler: slices, and reservations appearing and going,
// mapped to the slices of their node and pool.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Release == nil {
		return fmt.Errorf("slice return: Client and Release are required")
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("slice-return").
		Watches(&ipamv1.IPPoolSlice{}, &handler.EnqueueRequestForObject{}).
		Watches(&ipamv1.OverlappingRangeIPReservation{}, handler.EnqueueRequestsFromMapFunc(r.slicesOfReservation),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc:  func(event.CreateEvent) bool { return true },
				UpdateFunc:  func(event.UpdateEvent) bool { return false },
				DeleteFunc:  func(event.DeleteEvent) bool { return true },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		Complete(r)
}

// +kubebuilder:rbac:groups=ipam.netpool.io,resources=ippoolslices,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=ipam.netpool.io,resources=overlappingrangeipreservations,verbs=get;list;watch

// Reconcile gives one slice back if it has stayed empty for Grace.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &ipamv1.IPPoolSlice{}
	if err := r.Client.Get(ctx, req.NamespacedName, s); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to get slice %s: %w", req.Name, err)
	}
	block, err := netip.ParsePrefix(s.Spec.Range)
	if err != nil {
		logf.FromContext(ctx).Info("Ignoring a slice whose range does not parse", "slice", s.Name, "range", s.Spec.Range)
		return ctrl.Result{}, nil
	}
	var list ipamv1.OverlappingRangeIPReservationList
	if err := r.Client.List(ctx, &list, client.MatchingFields{index.ReservationNodePool: index.NodePoolKey(s.Spec.Node, s.Spec.Pool)},
		client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to list the reservations of node %s in IPPool %s: %w", s.Spec.Node, s.Spec.Pool, err)
	}
	for i := range list.Items {
		if a, err := netip.ParseAddr(list.Items[i].Spec.Address); err == nil && block.Contains(a.Unmap()) {
			r.forget(s.Name)
			return ctrl.Result{}, nil
		}
	}
	empty := r.Now.Now().Sub(r.markEmpty(s))
	if wait := r.Grace - empty; wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	detail := fmt.Sprintf("it held no reservation of node %s for %s", s.Spec.Node, empty.Round(time.Second))
	if err := r.Release.ReturnSlice(ctx, s, gcpolicy.ReasonSliceEmpty, detail); err != nil {
		return ctrl.Result{}, err
	}
	r.forget(s.Name)
	return ctrl.Result{}, nil
}

// slicesOfReservation maps a reservation to the slices of its node in its pool.
func (r *Reconciler) slicesOfReservation(ctx context.Context, obj client.Object) []reconcile.Request {
	res, ok := obj.(*ipamv1.OverlappingRangeIPReservation)
	if !ok {
		return nil
	}
	var list ipamv1.IPPoolSliceList
	key := index.NodePoolKey(res.Spec.Node, res.Spec.Pool)
	if err := r.Client.List(ctx, &list, client.MatchingFields{index.SliceNodePool: key}, client.UnsafeDisableDeepCopy); err != nil {
		logf.FromContext(ctx).Error(err, "Listing the slices of a node failed", "node", res.Spec.Node, "pool", res.Spec.Pool)
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}}
	}
	return reqs
}

// markEmpty records when this incarnation of s was first found empty and returns that time.
func (r *Reconciler) markEmpty(s *ipamv1.IPPoolSlice) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.emptySince == nil {
		r.emptySince = map[string]emptyMark{}
	}
	m, ok := r.emptySince[s.Name]
	if !ok || m.uid != s.UID {
		m = emptyMark{uid: s.UID, since: r.Now.Now()}
		r.emptySince[s.Name] = m
	}
	return m.since
}

func (r *Reconciler) forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.emptySince, name)
}
