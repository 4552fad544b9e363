package poolstatus

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/netpool/netpool/controller/internal/clock"
	"github.com/netpool/netpool/controller/internal/index"
	"github.com/netpool/netpool/controller/internal/metrics"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// Reconciler keeps every IPPool's status (capacity, allocated, free, the Ready,
// Exhausted and Invalid conditions and observedGeneration) and its metrics up to date. It reads
// the reservation count from a tally kept by its own reservation events, so a reconcile costs
// the same at 10 or 100,000 reservations, and it writes a pool's status at most once per
// Interval, so a burst of allocations costs a few writes, not one per allocation. It also owns the
// pool's finalizer (deletion.go), so that one writer sets all of a pool's conditions,
// and it records a Warning Event when a pool turns Exhausted or its deletion starts to wait.
type Reconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// Live reads from the API server: whether a deleted pool still holds reservations. Client
	// when nil.
	Live client.Reader
	// Recorder records the Events on pools; none are recorded when nil.
	Recorder events.EventRecorder
	// Metrics receives each pool's counts.
	Metrics *metrics.Metrics
	// Interval is the shortest time between two status writes of one pool.
	Interval time.Duration
	// Fanout stretches Interval in a large cluster: a pool's status writes cost at most Fanout
	// watch deliveries a second, one per node (fanout.go). 0 leaves Interval alone.
	Fanout float64
	// Nodes is how many nodes (so agents) the cluster has; with Fanout set and Nodes nil,
	// SetupWithManager counts them from the manager's Node informer.
	Nodes func() int
	// Now is the clock; time.Now when nil.
	Now clock.Func

	// tally counts reservations per pool; SetupWithManager creates it.
	tally *poolTally

	mu sync.Mutex
	// lastWrite is when each pool's status was last written.
	lastWrite map[string]time.Time
	// announced are the transitions already reported as Events.
	announced transitionMemo
}

// SetupWithManager registers the reconciler: pools (a spec change also re-judges the other pools
// of the network, whose overlaps may change; a deletion or a finalizer change queues the pool
// itself) and reservations, counted as they come and go.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Metrics == nil {
		return fmt.Errorf("pool status reconciler: Client and Metrics are required")
	}
	r.tally = newPoolTally()
	if r.Fanout > 0 && r.Nodes == nil {
		nodes, err := countNodes(context.Background(), mgr.GetCache())
		if err != nil {
			return err
		}
		r.Nodes = nodes.count
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("ippool-status").
		Watches(&ipamv1.IPPool{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfNetwork),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&ipamv1.IPPool{}, &handler.EnqueueRequestForObject{},
			builder.WithPredicates(predicate.Funcs{UpdateFunc: deletionOrFinalizersChanged})).
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&ipamv1.OverlappingRangeIPReservation{}), r.tally.handler())).
		Complete(r)
}

// +kubebuilder:rbac:groups=ipam.netpool.io,resources=ippools,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=ipam.netpool.io,resources=ippools/status,verbs=patch
// +kubebuilder:rbac:groups=ipam.netpool.io,resources=ippools/finalizers,verbs=update
// +kubebuilder:rbac:groups=ipam.netpool.io,resources=overlappingrangeipreservations,verbs=get;list;watch
// +kubebuilder:rbac:groups=ipam.netpool.io,resources=ippoolslices,verbs=list;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile keeps the pool's finalizer, computes its status and writes it when it changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &ipamv1.IPPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.ForgetPool(req.Name)
			r.forget(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to get IPPool %s: %w", req.Name, err)
	}
	del, err := r.reconcileDeletion(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	if del.done {
		r.Metrics.ForgetPool(req.Name)
		r.forget(req.Name)
		return ctrl.Result{}, nil
	}
	var res ctrl.Result
	if del.blocked {
		res.RequeueAfter = deletionRecheck
	}
	var peers ipamv1.IPPoolList
	if err := r.Client.List(ctx, &peers, client.MatchingFields{index.PoolNetwork: pool.Spec.NetworkName}); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to list the IPPools of network %q: %w", pool.Spec.NetworkName, err)
	}
	v := judgePool(pool, peers.Items, r.tally.count(pool.Name))
	if v.capacity != nil {
		r.Metrics.SetPool(pool.Name, v.capacity, v.allocated, v.free())
	} else {
		r.Metrics.ForgetPool(pool.Name)
	}
	updated := pool.DeepCopy()
	applyVerdict(updated, v)
	if del.blocked {
		setDeletionBlocked(updated, v.allocated)
	}
	if equality.Semantic.DeepEqual(pool.Status, updated.Status) {
		return res, nil
	}
	if wait := r.untilNextWrite(pool.Name); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if err := r.Client.Status().Patch(ctx, updated, client.MergeFrom(pool)); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to update the status of IPPool %s: %w", pool.Name, err)
	}
	r.wrote(pool.Name)
	recordTransitions(r.Recorder, &r.announced, pool, updated)
	return res, nil
}

// deletionOrFinalizersChanged passes the pool updates that the generation predicate hides from
// the deletion phase: the deletion mark and a change of finalizers.
func deletionOrFinalizersChanged(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return false
	}
	return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero() ||
		!slices.Equal(e.ObjectOld.GetFinalizers(), e.ObjectNew.GetFinalizers())
}

// poolsOfNetwork maps a pool event to that pool and every other pool of its network.
func (r *Reconciler) poolsOfNetwork(ctx context.Context, obj client.Object) []reconcile.Request {
	reqs := []reconcile.Request{{NamespacedName: types.NamespacedName{Name: obj.GetName()}}}
	pool, ok := obj.(*ipamv1.IPPool)
	if !ok {
		return reqs
	}
	var peers ipamv1.IPPoolList
	if err := r.Client.List(ctx, &peers, client.MatchingFields{index.PoolNetwork: pool.Spec.NetworkName}); err != nil {
		// The cache answers from memory; an error here means the index is missing, a setup bug
		// that the pool's own reconcile reports.
		return reqs
	}
	for _, p := range peers.Items {
		if p.Name != pool.Name {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
		}
	}
	return reqs
}

// untilNextWrite is how long the pool's status must wait before it may be written again.
func (r *Reconciler) untilNextWrite(pool string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	last, ok := r.lastWrite[pool]
	if !ok {
		return 0
	}
	return r.interval() - r.Now.Now().Sub(last)
}

// interval is the shortest time between two status writes of one pool in the cluster as it is.
func (r *Reconciler) interval() time.Duration {
	nodes := 0
	if r.Nodes != nil {
		nodes = r.Nodes()
	}
	return writeInterval(r.Interval, r.Fanout, nodes)
}

func (r *Reconciler) wrote(pool string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastWrite == nil {
		r.lastWrite = map[string]time.Time{}
	}
	r.lastWrite[pool] = r.Now.Now()
}

func (r *Reconciler) forget(pool string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.lastWrite, pool)
}
