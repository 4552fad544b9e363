package nad

import (
	"context"
	"errors"
	"fmt"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/netpool/netpool/controller/internal/index"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/ippool"
	"github.com/netpool/netpool/ipam"
)

// Event reasons, on a NAD.
const (
	// EventInvalidIPAMConfig (Warning): its netpool IPAM config does not load; the note names the
	// path, the field and the value.
	EventInvalidIPAMConfig = "InvalidIPAMConfig"
	// EventPoolCreated (Normal): the pool of one of its inline ranges was created.
	EventPoolCreated = "PoolCreated"
	// EventPoolUnusable (Warning): the pool it references or derives cannot serve it (missing,
	// another range, or its namespaceSelector does not admit the NAD's namespace).
	EventPoolUnusable = "PoolUnusable"
)

// Event actions (events.k8s.io/v1 requires one).
const (
	actionValidate = "Validate"
	actionCreate   = "Create"
)

// Reconciler checks every NetworkAttachmentDefinition that uses netpool IPAM, with the
// plugin's own parser (ipam.FromNetworkConfig), so a NAD the controller accepts is one the plugin
// accepts:
//
//   - a config that does not load gets a Warning Event naming the path, the field and the value,
//     and no pool;
//   - each inline range of a kubernetes-datastore section gets its pool, created if missing;
//   - a reference to an operator-made pool is checked: the pool exists, and its namespaceSelector
//     admits the NAD's namespace; a failure is a Warning Event;
//   - every pool a section uses is judged by the pool model (internal/ippool) as the agent judges
//     it: its enable_overlapping_ranges agrees with the pool's, the pool is not Invalid or yielding
//     to an overlapping pool, and every pool whose window it overlaps admits the namespace. A
//     derived pool that would fail is not created, and a NAD deriving more than
//     ippool.MaxDerivedPools pools creates none.
//
// Pools are not owned by NADs (a cluster-scoped object cannot be owned by a namespaced one, and
// reservations may outlive the NAD); they stay when the NAD goes.
type Reconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// Recorder records the Events on NADs.
	Recorder events.EventRecorder
}

// SetupWithManager registers the reconciler: NADs, the pools they use (created, deleted or
// respecified) and their namespaces' labels.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Recorder == nil {
		return fmt.Errorf("NAD reconciler: Client and Recorder are required")
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("nad").
		For(&nadv1.NetworkAttachmentDefinition{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&ipamv1.IPPool{}, handler.EnqueueRequestsFromMapFunc(r.nadsOfPool),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.nadsOfNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Complete(r)
}

// +kubebuilder:rbac:groups=k8s.cni.cncf.io,resources=network-attachment-definitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=ipam.netpool.io,resources=ippools,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile checks one NAD and ensures the pools of its inline ranges.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	nad := &nadv1.NetworkAttachmentDefinition{}
	if err := r.Client.Get(ctx, req.NamespacedName, nad); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to get NetworkAttachmentDefinition %s: %w", req.NamespacedName, err)
	}
	sections, err := ipam.FromNetworkConfig([]byte(nad.Spec.Config))
	if err != nil {
		r.Recorder.Eventf(nad, nil, corev1.EventTypeWarning, EventInvalidIPAMConfig, actionValidate,
			"spec.config: %v; no pool is created until it is fixed", err)
		return ctrl.Result{}, nil
	}
	nsLabels, err := r.namespaceLabels(ctx, nad.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := ippool.CheckDerivedCount(derivedRanges(sections)); err != nil {
		r.Recorder.Eventf(nad, nil, corev1.EventTypeWarning, EventPoolUnusable, actionValidate,
			"spec.config: %v; no pool is created until it is fixed", err)
		return ctrl.Result{}, nil
	}
	var errs []error
	for _, s := range sections {
		c := s.Config
		if c.Datastore != ipam.DatastoreKubernetes {
			continue // the embedded store keeps its state on each node, in no pool
		}
		if c.Pool != "" {
			errs = append(errs, r.checkReference(ctx, nad, s, nsLabels))
			continue
		}
		for i, rng := range c.Ranges {
			errs = append(errs, r.ensurePool(ctx, nad, s, i, rng, nsLabels))
		}
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// derivedRanges counts the inline ranges of a NAD's kubernetes-datastore sections: the pools it
// derives.
func derivedRanges(sections []ipam.Section) int {
	n := 0
	for _, s := range sections {
		if s.Config.Datastore == ipam.DatastoreKubernetes && s.Config.Pool == "" {
			n += len(s.Config.Ranges)
		}
	}
	return n
}

// ensurePool creates the pool of inline range i of section s when it is missing, and otherwise
// checks that the existing pool is the one the range describes and can serve the NAD. A pool that
// the rules of the pool model would refuse (it overlaps an operator's pool that does not admit the
// namespace, for example) is not created; the NAD gets a Warning Event instead.
func (r *Reconciler) ensurePool(ctx context.Context, nad *nadv1.NetworkAttachmentDefinition, s ipam.Section,
	i int, rng ipam.Range, nsLabels map[string]string) error {
	want, err := ippool.Derive(s.Config.NetworkName, rng, ippool.RulesOf(s.Config))
	if err != nil {
		r.unusable(nad, s, err)
		return nil
	}
	pool := &ipamv1.IPPool{}
	err = r.Client.Get(ctx, client.ObjectKey{Name: want.Name}, pool)
	if apierrors.IsNotFound(err) {
		if err := r.judge(ctx, nad, s, want, nsLabels); err != nil {
			if !errors.Is(err, errUnusable) {
				return err
			}
			return nil
		}
		return r.createPool(ctx, nad, s, i, want, rng)
	}
	if err != nil {
		return fmt.Errorf("failed to get IPPool %s: %w", want.Name, err)
	}
	if err := ippool.CheckDerivedFor(pool, s.Config.NetworkName, rng); err != nil {
		r.unusable(nad, s, fmt.Errorf("range %s of network %q: %w", rng.Subnet, s.Config.NetworkName, err))
		return nil
	}
	if _, err := ippool.Resolve(pool, s.Config); err != nil {
		r.unusable(nad, s, err)
		return nil
	}
	if err := r.judge(ctx, nad, s, pool, nsLabels); err != nil && !errors.Is(err, errUnusable) {
		return err
	}
	return nil
}

// errUnusable marks a judgement already reported on the NAD.
var errUnusable = errors.New("pool unusable")

// judge applies the pool model to one pool a section uses, as the agent will: the pool's verdict
// (its spec parses, and it does not yield to an overlapping pool) and the namespace admission of
// every pool whose window it overlaps. A refusal is reported on the NAD and returned wrapping
// errUnusable; any other error is the API's.
func (r *Reconciler) judge(ctx context.Context, nad *nadv1.NetworkAttachmentDefinition, s ipam.Section,
	pool *ipamv1.IPPool, nsLabels map[string]string) error {
	parsed, err := ippool.Parse(pool)
	if err != nil {
		r.unusable(nad, s, fmt.Errorf("IPPool %s: %w", pool.Name, err))
		return errUnusable
	}
	var peers ipamv1.IPPoolList
	if err := r.Client.List(ctx, &peers, client.MatchingFields{index.PoolNetwork: pool.Spec.NetworkName}); err != nil {
		return fmt.Errorf("failed to list the IPPools of network %q: %w", pool.Spec.NetworkName, err)
	}
	if text := ippool.OverlapText(parsed, peers.Items); text != "" {
		r.unusable(nad, s, fmt.Errorf("IPPool %s cannot serve: %s", pool.Name, text))
		return errUnusable
	}
	if err := ippool.Serving(pool); err != nil {
		r.unusable(nad, s, err)
		return errUnusable
	}
	subject := ippool.Subject{Namespace: nad.Namespace, NamespaceLabels: nsLabels}
	if err := ippool.Admit(ippool.Governing(parsed, peers.Items), subject); err != nil {
		r.unusable(nad, s, err)
		return errUnusable
	}
	return nil
}

// createPool creates the derived pool of inline range i of section s.
func (r *Reconciler) createPool(ctx context.Context, nad *nadv1.NetworkAttachmentDefinition, s ipam.Section,
	i int, pool *ipamv1.IPPool, rng ipam.Range) error {
	if err := r.Client.Create(ctx, pool); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil // the agent (or another NAD) created it first; its event brings us back
		}
		if apierrors.IsInvalid(err) {
			r.unusable(nad, s, fmt.Errorf("range %s: the API server rejects its IPPool: %w", rng.Subnet, err))
			return nil
		}
		return fmt.Errorf("failed to create IPPool %s: %w", pool.Name, err)
	}
	logf.FromContext(ctx).Info("Created the pool of a NAD's range", "pool", pool.Name, "range", rng.Subnet, "section", s.Path)
	r.Recorder.Eventf(nad, pool, corev1.EventTypeNormal, EventPoolCreated, actionCreate,
		"Created IPPool %s for range %d (%s) of %s", pool.Name, i, rng.Subnet, s.Path)
	return nil
}

// checkReference checks a section that references an operator-made pool.
func (r *Reconciler) checkReference(ctx context.Context, nad *nadv1.NetworkAttachmentDefinition, s ipam.Section,
	nsLabels map[string]string) error {
	pool := &ipamv1.IPPool{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: s.Config.Pool}, pool); err != nil {
		if apierrors.IsNotFound(err) {
			r.unusable(nad, s, fmt.Errorf("pool %q: no IPPool of that name", s.Config.Pool))
			return nil
		}
		return fmt.Errorf("failed to get IPPool %s: %w", s.Config.Pool, err)
	}
	if err := ippool.CheckReference(pool, s.Config.NetworkName); err != nil {
		r.unusable(nad, s, err)
		return nil
	}
	if _, err := ippool.Resolve(pool, s.Config); err != nil {
		r.unusable(nad, s, err)
		return nil
	}
	if err := r.judge(ctx, nad, s, pool, nsLabels); err != nil && !errors.Is(err, errUnusable) {
		return err
	}
	return nil
}

// unusable reports on the NAD that section s cannot draw from its pool.
func (r *Reconciler) unusable(nad *nadv1.NetworkAttachmentDefinition, s ipam.Section, err error) {
	r.Recorder.Eventf(nad, nil, corev1.EventTypeWarning, EventPoolUnusable, actionValidate, "spec.config %s: %v", s.Path, err)
}

// namespaceLabels returns the labels of a namespace; none when the cache has not seen it.
func (r *Reconciler) namespaceLabels(ctx context.Context, name string) (map[string]string, error) {
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to get namespace %s: %w", name, err)
	}
	return ns.Labels, nil
}

// nadsOfPool maps a pool to the NADs that derive or reference it.
func (r *Reconciler) nadsOfPool(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.listNADs(ctx, client.MatchingFields{index.NADPool: obj.GetName()})
}

// nadsOfNamespace maps a namespace to its NADs.
func (r *Reconciler) nadsOfNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.listNADs(ctx, client.InNamespace(obj.GetName()))
}

func (r *Reconciler) listNADs(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	var list nadv1.NetworkAttachmentDefinitionList
	if err := r.Client.List(ctx, &list, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		logf.FromContext(ctx).Error(err, "Listing NetworkAttachmentDefinitions failed")
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}}
	}
	return reqs
}
