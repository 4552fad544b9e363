package egressrouter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	networkv1 "github.com/netpool/netpool/crds/network/v1"
)

// egressFieldManager is the one field manager of every child the reconciler applies.
const egressFieldManager = "netpool-controller/egress-router"

// routerPoolField indexes routers by spec.pool: a pool event finds the routers claiming in it.
const routerPoolField = "spec.pool"

// reservationRouterField indexes reservations by the RouterUIDLabel: every reconcile finds the
// router's own claims without reading every reservation of the cluster.
const reservationRouterField = "metadata.labels.egress-router-uid"

// Event reasons of the EgressRouter reconciler, on the router.
const (
	// EventEgressReplacingPod (Normal): the pod of an older config is deleted; the new one follows.
	EventEgressReplacingPod = "ReplacingPod"
	// EventEgressPodCreated (Normal): the pod of the current config was created.
	EventEgressPodCreated = "PodCreated"
	// EventEgressPodFailed (Warning): the pod failed and is replaced.
	EventEgressPodFailed = "PodFailed"
	// EventEgressAvailable (Normal): the router became Available.
	EventEgressAvailable = "Available"
	// EventEgressAddressClaimed (Normal): an address was claimed in the router's pool.
	EventEgressAddressClaimed = "AddressClaimed"
	// EventEgressAddressReleased (Normal): an address the router no longer uses went back to its pool.
	EventEgressAddressReleased = "AddressReleased"
	// The Degraded reasons (NameConflict, PoolNotFound, PoolExhausted, ...) are also Warning Events,
	// recorded when the router becomes Degraded with that reason.
)

// Event actions (events.k8s.io/v1 requires one).
const (
	actionClaim    = "Claim"
	actionDelete   = "Delete"
	actionCreate   = "Create"
	actionValidate = "Validate"
	actionRelease  = "Release"
)

// DefaultWorkers is how many routers are reconciled at once. Each reconcile is a few requests.
const DefaultWorkers = 8

// egressRetry is how soon a router whose pool cannot serve it is looked at again, beyond the
// pool's own events: an address another attachment releases raises no event here.
const egressRetry = 30 * time.Second

// Reconciler makes each EgressRouter X into NAD X, Pod X and Service X, all
// controlled by X and server-side applied by one field manager, and reports the router's status.
// A pod of an older config is deleted, and its successor created only once it is gone, so two pods
// never hold the router's address. An object named X that X does not control is never adopted.
type Reconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// Live reads from the API server, where the cache may lag behind a write just made.
	Live client.Reader
	// Recorder records the Events on routers.
	Recorder events.EventRecorder
	// Image is the router pods' image.
	Image string
	// Workers is how many routers are reconciled at once.
	Workers int

	// failedPods are the routers (by UID) whose pod failed and whose replacement is not Available
	// yet. Degraded PodFailed is kept from here, not from the router's status as the cache shows
	// it: a reconcile that read its router before the cache saw the PodFailed status would
	// otherwise write Degraded False over it, and nothing would ever set it again.
	failedPods sync.Map
}

// SetupWithManager registers the reconciler: routers, their three children (by name, so that a
// foreign object's departure ends a name conflict), pools, and the labels of namespaces (which a
// pool's namespaceSelector admits).
func (e *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if e.Client == nil || e.Live == nil || e.Recorder == nil || e.Image == "" {
		return fmt.Errorf("egress router reconciler: Client, Live, Recorder and Image are required")
	}
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &networkv1.EgressRouter{}, routerPoolField, func(obj client.Object) []string {
		if r, ok := obj.(*networkv1.EgressRouter); ok && r.Spec.Pool != "" {
			return []string{r.Spec.Pool}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to index routers by %s: %w", routerPoolField, err)
	}
	err = mgr.GetFieldIndexer().IndexField(context.Background(), &ipamv1.OverlappingRangeIPReservation{}, reservationRouterField, func(obj client.Object) []string {
		if uid := obj.GetLabels()[networkv1.RouterUIDLabel]; uid != "" {
			return []string{uid}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to index reservations by %s: %w", reservationRouterField, err)
	}
	child := handler.EnqueueRequestsFromMapFunc(e.routerOfChild)
	return ctrl.NewControllerManagedBy(mgr).
		Named("egress-router").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(e.Workers, 1)}).
		For(&networkv1.EgressRouter{}, builder.WithPredicates(routerSpecChanged())).
		Watches(&nadv1.NetworkAttachmentDefinition{}, child).
		Watches(&corev1.Pod{}, child).
		Watches(&corev1.Service{}, child).
		Watches(&ipamv1.IPPool{}, handler.EnqueueRequestsFromMapFunc(e.routersOfPool)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(e.routersOfNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Complete(e)
}

// routerSpecChanged passes every router event but an update of the status alone (the reconciler's
// own write), which would only repeat the reconcile that made it.
func routerSpecChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(ev event.UpdateEvent) bool {
		o, n := ev.ObjectOld, ev.ObjectNew
		return o.GetGeneration() != n.GetGeneration() || !equality.Semantic.DeepEqual(o.GetDeletionTimestamp(), n.GetDeletionTimestamp()) ||
			!slices.Equal(o.GetFinalizers(), n.GetFinalizers()) || o.GetUID() != n.GetUID()
	}}
}

// routerOfChild maps a NAD, Pod or Service to the router that controls it, or else to the router
// of the same name in its namespace, if there is one.
func (e *Reconciler) routerOfChild(ctx context.Context, obj client.Object) []reconcile.Request {
	if ref := metav1.GetControllerOf(obj); ref != nil && ref.Kind == "EgressRouter" && ref.APIVersion == networkv1.GroupVersion.String() {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}}}
	}
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if err := e.Client.Get(ctx, key, &networkv1.EgressRouter{}); err != nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// routersOfPool maps a pool to the routers that claim in it.
func (e *Reconciler) routersOfPool(ctx context.Context, obj client.Object) []reconcile.Request {
	var list networkv1.EgressRouterList
	if err := e.Client.List(ctx, &list, client.MatchingFields{routerPoolField: obj.GetName()}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return reqs
}

// +kubebuilder:rbac:groups=network.netpool.io,resources=egressrouters,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=network.netpool.io,resources=egressrouters/status,verbs=patch
// +kubebuilder:rbac:groups=network.netpool.io,resources=egressrouters/finalizers,verbs=update
// +kubebuilder:rbac:groups=k8s.cni.cncf.io,resources=network-attachment-definitions,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=ipam.netpool.io,resources=overlappingrangeipreservations,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=ipam.netpool.io,resources=ippools,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one router's children to its spec and writes its status.
func (e *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r := &networkv1.EgressRouter{}
	if err := e.Client.Get(ctx, req.NamespacedName, r); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to get EgressRouter %s: %w", req, err)
	}
	if !r.DeletionTimestamp.IsZero() {
		return e.finalize(ctx, r)
	}
	if !controllerutil.ContainsFinalizer(r, networkv1.ReleaseAddressFinalizer) {
		base := r.DeepCopy()
		controllerutil.AddFinalizer(r, networkv1.ReleaseAddressFinalizer)
		if err := e.Client.Patch(ctx, r, client.MergeFrom(base)); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to add the finalizer of EgressRouter %s: %w", req, err)
		}
	}
	before := r.DeepCopy()
	obs, result, err := e.reconcileChildren(ctx, r)
	if err != nil {
		return ctrl.Result{}, err
	}
	if obs.podFailed {
		e.failedPods.Store(r.UID, struct{}{})
	} else if _, failed := e.failedPods.Load(r.UID); failed {
		obs.podFailed = true
	}
	setEgressConditions(r, obs)
	if obs.podFailed && meta.IsStatusConditionTrue(r.Status.Conditions, networkv1.EgressRouterAvailable) {
		// The replacement works: the failure is over.
		e.failedPods.Delete(r.UID)
		obs.podFailed = false
		setEgressConditions(r, obs)
	}
	e.recordTransitions(before, r)
	if !equality.Semantic.DeepEqual(before.Status, r.Status) {
		if err := e.Client.Status().Patch(ctx, r, client.MergeFrom(before)); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to update the status of EgressRouter %s: %w", req, err)
		}
	}
	return result, nil
}

// reconcileChildren resolves the addresses, then applies the NAD and the Service, and replaces
// or repairs the pod. It returns what it observed for the status.
func (e *Reconciler) reconcileChildren(ctx context.Context, r *networkv1.EgressRouter) (egressObservation, ctrl.Result, error) {
	var obs egressObservation
	mode, err := modeOf(r)
	if p := (*egressProblem)(nil); errors.As(err, &p) {
		// Nothing this controller could write would be right: the children stay as they are.
		obs.problem, obs.addresses, obs.pod = p, r.Status.Addresses, e.currentPod(ctx, r)
		return obs, ctrl.Result{}, nil
	}
	addresses, keep := r.Spec.Addresses, []string(nil)
	if r.Spec.Pool != "" {
		var err error
		addresses, keep, err = e.claimPoolAddresses(ctx, r)
		var p *egressProblem
		if errors.As(err, &p) {
			obs.problem, obs.addresses = p, r.Status.Addresses
			obs.pod = e.currentPod(ctx, r)
			return obs, ctrl.Result{RequeueAfter: egressRetry}, nil
		}
		if err != nil {
			return obs, ctrl.Result{}, err
		}
	}
	obs.addresses = addresses
	nad, pod, svc := &nadv1.NetworkAttachmentDefinition{}, &corev1.Pod{}, &corev1.Service{}
	existing := map[string]bool{}
	for kind, obj := range map[string]client.Object{"NetworkAttachmentDefinition": nad, "Pod": pod, "Service": svc} {
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(r), obj)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return obs, ctrl.Result{}, fmt.Errorf("failed to get %s %s/%s: %w", kind, r.Namespace, r.Name, err)
		}
		existing[kind] = true
		if !metav1.IsControlledBy(obj, r) {
			obs.problem = &egressProblem{networkv1.ReasonNameConflict, fmt.Sprintf(
				"%s %s/%s exists and is not controlled by this router; it is left untouched", kind, r.Namespace, r.Name)}
			return obs, ctrl.Result{}, nil
		}
	}
	d, err := newEgressDesired(r, mode, addresses, e.Image)
	if err != nil {
		return obs, ctrl.Result{}, err
	}
	apply := []client.ApplyOption{client.FieldOwner(egressFieldManager), client.ForceOwnership}
	// Each child is applied unless the cache shows it as the reconciler would write it: an
	// Apply that changes nothing still costs a request, and every event of the router or its
	// children reconciles it.
	if !existing["NetworkAttachmentDefinition"] || nad.Spec.Config != d.nadConfig {
		if err := e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(d.nad()), apply...); err != nil {
			return obs, ctrl.Result{}, fmt.Errorf("failed to apply NAD %s/%s: %w", r.Namespace, r.Name, err)
		}
	}
	if existing["Service"] && (svc.Spec.ClusterIP == corev1.ClusterIPNone) != d.headless() {
		// A Service's clusterIP cannot change: going to or from headless takes a new Service.
		if err := e.Client.Delete(ctx, svc, client.Preconditions{UID: &svc.UID}); err != nil && !apierrors.IsNotFound(err) {
			return obs, ctrl.Result{}, fmt.Errorf("failed to delete Service %s/%s: %w", r.Namespace, r.Name, err)
		}
		return obs, ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if existing["Service"] {
		if err := e.restoreServicePorts(ctx, svc, d); err != nil {
			return obs, ctrl.Result{}, err
		}
	}
	if !existing["Service"] || !serviceMatches(svc, d) {
		if err := e.Client.Apply(ctx, d.service(), apply...); err != nil {
			return obs, ctrl.Result{}, fmt.Errorf("failed to apply Service %s/%s: %w", r.Namespace, r.Name, err)
		}
	}
	if !existing["Pod"] {
		return e.createPod(ctx, r, d, keep, obs)
	}
	switch {
	case pod.DeletionTimestamp != nil:
		obs.replacing = true
		return obs, ctrl.Result{}, nil
	case pod.Annotations[networkv1.ConfigHashAnnotation] != d.hash:
		e.Recorder.Eventf(r, pod, corev1.EventTypeNormal, EventEgressReplacingPod, actionDelete,
			"deleting pod %s of an older config; its successor is created once it is gone", pod.Name)
		obs.replacing = true
		return obs, ctrl.Result{}, e.deletePod(ctx, pod)
	case pod.Status.Phase == corev1.PodFailed:
		e.Recorder.Eventf(r, pod, corev1.EventTypeWarning, EventEgressPodFailed, actionDelete, "pod %s failed; replacing it", pod.Name)
		obs.replacing, obs.podFailed = true, true
		return obs, ctrl.Result{}, e.deletePod(ctx, pod)
	}
	// The pod runs the current config: repair any drift of what the reconciler set on it, and
	// release the addresses of older configs, which no pod holds any more.
	if !podMatches(pod, d) {
		if err := e.Client.Apply(ctx, d.pod(), apply...); err != nil {
			return obs, ctrl.Result{}, fmt.Errorf("failed to apply pod %s/%s: %w", r.Namespace, r.Name, err)
		}
	}
	if err := e.releaseClaims(ctx, r, keep); err != nil {
		return obs, ctrl.Result{}, err
	}
	obs.pod = pod
	return obs, ctrl.Result{}, nil
}

// createPod creates the pod of the current config once the API server confirms that no pod of
// the router exists (the cache may not have seen a pod created or deleted a moment ago).
func (e *Reconciler) createPod(ctx context.Context, r *networkv1.EgressRouter, d *egressDesired, keep []string, obs egressObservation) (egressObservation, ctrl.Result, error) {
	err := e.Live.Get(ctx, client.ObjectKeyFromObject(r), &corev1.Pod{})
	switch {
	case err == nil:
		obs.replacing = true
		return obs, ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
	case !apierrors.IsNotFound(err):
		return obs, ctrl.Result{}, fmt.Errorf("failed to get pod %s/%s: %w", r.Namespace, r.Name, err)
	}
	// No pod holds any address of the router now: those of older configs go back to the pool
	// before the new pod is created.
	if err := e.releaseClaims(ctx, r, keep); err != nil {
		return obs, ctrl.Result{}, err
	}
	pod, err := d.newPod()
	if err != nil {
		return obs, ctrl.Result{}, err
	}
	if err := e.Client.Create(ctx, pod, client.FieldOwner(egressFieldManager)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return obs, ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
		}
		return obs, ctrl.Result{}, fmt.Errorf("failed to create pod %s/%s: %w", r.Namespace, r.Name, err)
	}
	e.Recorder.Eventf(r, pod, corev1.EventTypeNormal, EventEgressPodCreated, actionCreate, "created pod %s with config %s", pod.Name, d.hash)
	obs.pod = pod
	return obs, ctrl.Result{}, nil
}

// deletePod deletes pod gracefully (never forced), only if it is still the same pod.
func (e *Reconciler) deletePod(ctx context.Context, pod *corev1.Pod) error {
	if err := e.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// currentPod returns the router's pod from the cache when the router controls it, else nil.
func (e *Reconciler) currentPod(ctx context.Context, r *networkv1.EgressRouter) *corev1.Pod {
	pod := &corev1.Pod{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(r), pod); err != nil || !metav1.IsControlledBy(pod, r) {
		return nil
	}
	return pod
}

// finalize runs when the router is being deleted: its pod goes first, then the addresses it held
// go back to the pool, and only then is the finalizer removed. The NAD and the Service are left to
// the garbage collector, which their owner references point at the router.
func (e *Reconciler) finalize(ctx context.Context, r *networkv1.EgressRouter) (ctrl.Result, error) {
	e.failedPods.Delete(r.UID)
	if !controllerutil.ContainsFinalizer(r, networkv1.ReleaseAddressFinalizer) {
		return ctrl.Result{}, nil
	}
	pod := &corev1.Pod{}
	err := e.Live.Get(ctx, client.ObjectKeyFromObject(r), pod)
	switch {
	case err == nil && metav1.IsControlledBy(pod, r):
		if pod.DeletionTimestamp == nil {
			if err := e.deletePod(ctx, pod); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{RequeueAfter: time.Second}, nil // the pod's deletion event comes sooner
	case err != nil && !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("failed to get pod %s/%s: %w", r.Namespace, r.Name, err)
	}
	if err := e.releaseClaims(ctx, r, nil); err != nil {
		return ctrl.Result{}, err
	}
	base := r.DeepCopy()
	controllerutil.RemoveFinalizer(r, networkv1.ReleaseAddressFinalizer)
	if err := e.Client.Patch(ctx, r, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("failed to remove the finalizer of EgressRouter %s/%s: %w", r.Namespace, r.Name, err)
	}
	return ctrl.Result{}, nil
}

// recordTransitions emits an Event when the router becomes Available, and a Warning when it
// becomes Degraded for a new reason.
func (e *Reconciler) recordTransitions(before, after *networkv1.EgressRouter) {
	was := meta.FindStatusCondition(before.Status.Conditions, networkv1.EgressRouterDegraded)
	now := meta.FindStatusCondition(after.Status.Conditions, networkv1.EgressRouterDegraded)
	if now != nil && now.Status == metav1.ConditionTrue && now.Reason != networkv1.ReasonPodFailed &&
		(was == nil || was.Status != metav1.ConditionTrue || was.Reason != now.Reason) {
		e.Recorder.Eventf(after, nil, corev1.EventTypeWarning, now.Reason, actionValidate, "%s", now.Message)
	}
	if meta.IsStatusConditionTrue(after.Status.Conditions, networkv1.EgressRouterAvailable) &&
		!meta.IsStatusConditionTrue(before.Status.Conditions, networkv1.EgressRouterAvailable) {
		e.Recorder.Eventf(after, nil, corev1.EventTypeNormal, EventEgressAvailable, actionValidate, "the router is Available with %s", addressList(after.Status.Addresses))
	}
}

// restoreServicePorts replaces the Service's ports and selector when someone changed them. An
// Apply alone cannot: a port whose number was edited is another list item, owned by whoever
// edited it, and the Apply would add ours beside it (and fail on the duplicate name).
func (e *Reconciler) restoreServicePorts(ctx context.Context, svc *corev1.Service, d *egressDesired) error {
	want := d.servicePorts()
	if equality.Semantic.DeepEqual(svc.Spec.Selector, d.routerLabels()) && slices.EqualFunc(svc.Spec.Ports, want, sameServicePort) {
		return nil
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "replace", "path": "/spec/ports", "value": want},
		{"op": "replace", "path": "/spec/selector", "value": d.routerLabels()},
	})
	if err != nil {
		return fmt.Errorf("failed to encode the ports of Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	if err := e.Client.Patch(ctx, svc, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(egressFieldManager)); err != nil {
		return fmt.Errorf("failed to restore the ports of Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

func sameServicePort(a, b corev1.ServicePort) bool {
	return a.Name == b.Name && a.Protocol == b.Protocol && a.Port == b.Port && a.TargetPort == b.TargetPort
}

// serviceMatches reports whether the cached Service has what the reconciler applies.
func serviceMatches(svc *corev1.Service, d *egressDesired) bool {
	return equality.Semantic.DeepEqual(svc.Spec.Selector, d.routerLabels()) &&
		slices.EqualFunc(svc.Spec.Ports, d.servicePorts(), sameServicePort) &&
		(svc.Spec.ClusterIP == corev1.ClusterIPNone) == d.headless()
}

// podMatches reports whether the cached pod (slimmed: see slimPod) has the labels and annotations
// the reconciler applies; its spec follows from the config hash.
func podMatches(pod *corev1.Pod, d *egressDesired) bool {
	for k, v := range d.podLabels() {
		if pod.Labels[k] != v {
			return false
		}
	}
	return pod.Annotations[nadv1.NetworkAttachmentAnnot] == d.networks && pod.Annotations[networkv1.ConfigHashAnnotation] == d.hash
}
