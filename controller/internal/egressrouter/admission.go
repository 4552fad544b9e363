package egressrouter

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/netpool/netpool/controller/internal/index"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	networkv1 "github.com/netpool/netpool/crds/network/v1"
	"github.com/netpool/netpool/internal/ippool"
)

// admitRouter applies the pool model's admission to the router's namespace, as the agent applies
// it to a pod's: the namespaceSelector of the pool and of every pool whose addresses it overlaps
// (ippool.Governing, ippool.Admit). The pool's nodeSelector does not apply: the router's claim
// belongs to no node. A router its pool does not admit claims nothing: a PoolNotAdmitted problem.
func (e *Reconciler) admitRouter(ctx context.Context, r *networkv1.EgressRouter, pool *ipamv1.IPPool) error {
	parsed, err := ippool.Parse(pool)
	if err != nil {
		return &egressProblem{networkv1.ReasonPoolInvalid, fmt.Sprintf("IPPool %s: %v", pool.Name, err)}
	}
	var peers ipamv1.IPPoolList
	if err := e.Client.List(ctx, &peers, client.MatchingFields{index.PoolNetwork: pool.Spec.NetworkName}); err != nil {
		return fmt.Errorf("failed to list the IPPools of network %q: %w", pool.Spec.NetworkName, err)
	}
	governing := ippool.Governing(parsed, peers.Items)
	subject := ippool.Subject{Namespace: r.Namespace}
	if ippool.SelectsNamespaces(governing) {
		if subject.NamespaceLabels, err = e.namespaceLabels(ctx, r.Namespace); err != nil {
			return err
		}
	}
	if err := ippool.Admit(governing, subject); err != nil {
		return &egressProblem{networkv1.ReasonPoolNotAdmitted, fmt.Sprintf("EgressRouter %s/%s: %v", r.Namespace, r.Name, err)}
	}
	return nil
}

// namespaceLabels returns the labels of the router's namespace, from the cache or, before the cache
// has seen the namespace, from the API server: admission must not judge a namespace as unlabelled.
func (e *Reconciler) namespaceLabels(ctx context.Context, name string) (map[string]string, error) {
	ns := &corev1.Namespace{}
	err := e.Client.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		err = e.Live.Get(ctx, client.ObjectKey{Name: name}, ns)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to get namespace %s: %w", name, err)
	}
	return ns.Labels, nil
}

// routersOfNamespace maps a namespace whose labels changed to its routers that claim in a pool:
// the change may admit them, or no longer.
func (e *Reconciler) routersOfNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	var list networkv1.EgressRouterList
	if err := e.Client.List(ctx, &list, client.InNamespace(obj.GetName())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Spec.Pool != "" {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}
