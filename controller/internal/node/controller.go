package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	"github.com/netpool/netpool/controller/internal/predicates"
	"github.com/netpool/netpool/controller/internal/release"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/gcpolicy"
	"github.com/netpool/netpool/internal/kubeclient/crclient"
)

// Reconciler reclaims what a deleted node held: its reservations are released (reason
// NodeDeleted) and its slices go back to their pools. A reservation whose pod runs on another
// (existing) node is kept: its node name is the agent's, which then differs from the Node's, and
// the GC judges it by its pod. A node counts as deleted once neither the
// cache nor the API server has it, and it has stayed so for Grace, so a node object deleted and
// registered again by its kubelet keeps its addresses. The reconcile key is the node name; nodes'
// deletions, and the initial list of reservations and slices (what was left while the controller
// was down), queue it.
type Reconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// Live reads from the API server.
	Live client.Reader
	// Release releases the node's reservations and reports the slices it returns.
	Release *release.Releaser
	// Grace is how long a node must be gone before its holdings are reclaimed.
	Grace time.Duration
	// Now is the clock; time.Now when nil.
	Now clock.Func

	mu sync.Mutex
	// goneSince is when each missing node was first found missing.
	goneSince map[string]time.Time
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Live == nil || r.Release == nil {
		return fmt.Errorf("node reclaim: Client, Live and Release are required")
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("node-reclaim").
		Watches(&corev1.Node{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			UpdateFunc:  func(event.UpdateEvent) bool { return false },
			DeleteFunc:  func(event.DeleteEvent) bool { return true },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		Watches(&ipamv1.OverlappingRangeIPReservation{}, handler.EnqueueRequestsFromMapFunc(nodeOfObject),
			builder.WithPredicates(predicates.CreatedOnly())).
		Watches(&ipamv1.IPPoolSlice{}, handler.EnqueueRequestsFromMapFunc(nodeOfObject),
			builder.WithPredicates(predicates.CreatedOnly())).
		Complete(r)
}

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=ipam.netpool.io,resources=ippoolslices,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=ipam.netpool.io,resources=overlappingrangeipreservations,verbs=get;list;watch;delete

// Reconcile reclaims the holdings of one node if it is gone.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	gone, err := r.nodeGone(ctx, req.Name)
	if err != nil || !gone {
		r.forget(req.Name)
		return ctrl.Result{}, err
	}
	if wait := r.Grace - r.Now.Now().Sub(r.markGone(req.Name)); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	var errs []error
	var reservations ipamv1.OverlappingRangeIPReservationList
	if err := r.Client.List(ctx, &reservations, client.MatchingFields{index.ReservationNode: req.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to list the reservations of node %s: %w", req.Name, err)
	}
	for i := range reservations.Items {
		res := &reservations.Items[i]
		pod := r.cachedPod(ctx, res)
		v := gcpolicy.OnDeletedNode(res, pod, req.Name)
		if v.Reason == "" {
			if v.Detail != "" {
				// Releasing would free an address in use; the GC judges it by its pod instead.
				logf.FromContext(ctx).Info("Keeping a reservation of a node without a Node object", "reservation", res.Name,
					"node", req.Name, "podRef", res.Spec.PodRef, "detail", v.Detail)
			}
			continue
		}
		errs = append(errs, r.Release.Release(ctx, res, v.Reason, v.Detail, pod))
	}
	var slices ipamv1.IPPoolSliceList
	if err := r.Client.List(ctx, &slices, client.MatchingFields{index.SliceNode: req.Name}); err != nil {
		return ctrl.Result{}, errors.Join(append(errs, fmt.Errorf("failed to list the slices of node %s: %w", req.Name, err))...)
	}
	for i := range slices.Items {
		detail := fmt.Sprintf("node %s was deleted", req.Name)
		errs = append(errs, r.Release.ReturnSlice(ctx, &slices.Items[i], gcpolicy.ReasonNodeDeleted, detail))
	}
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, err
	}
	r.forget(req.Name)
	return ctrl.Result{}, nil
}

// nodeGone reports whether the node exists neither in the cache nor in the API server.
func (r *Reconciler) nodeGone(ctx context.Context, name string) (bool, error) {
	node := &corev1.Node{}
	for _, c := range []client.Reader{r.Client, r.Live} {
		err := c.Get(ctx, client.ObjectKey{Name: name}, node)
		if err == nil {
			return false, nil
		}
		if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("failed to get node %s: %w", name, err)
		}
	}
	return true, nil
}

// cachedPod is the pod of a reservation if the cache has it, for the release Event.
func (r *Reconciler) cachedPod(ctx context.Context, res *ipamv1.OverlappingRangeIPReservation) *corev1.Pod {
	ns, name, ok := gcpolicy.SplitPodRef(res.Spec.PodRef)
	if !ok {
		return nil
	}
	pod, err := gcpolicy.GetPod(ctx, crclient.Reader(r.Client), types.NamespacedName{Namespace: ns, Name: name})
	if err != nil {
		return nil // the Event then goes to the pool; the note names the pod either way
	}
	return pod
}

// markGone records when the node was first found gone and returns that time.
func (r *Reconciler) markGone(name string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.goneSince == nil {
		r.goneSince = map[string]time.Time{}
	}
	since, ok := r.goneSince[name]
	if !ok {
		since = r.Now.Now()
		r.goneSince[name] = since
	}
	return since
}

func (r *Reconciler) forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.goneSince, name)
}

// nodeOfObject maps a reservation or a slice to its node.
func nodeOfObject(_ context.Context, obj client.Object) []reconcile.Request {
	var node string
	switch o := obj.(type) {
	case *ipamv1.OverlappingRangeIPReservation:
		node = o.Spec.Node
	case *ipamv1.IPPoolSlice:
		node = o.Spec.Node
	}
	if node == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: node}}}
}
