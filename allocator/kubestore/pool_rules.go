package kubestore

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/ippool"
	"github.com/netpool/netpool/ipam"
)

// poolNetworkField indexes the cached IPPools by spec.networkName: the pools of one address space.
const poolNetworkField = "spec.networkName"

// currentPool returns the pool of st as the cache holds it now (its conditions, selectors and
// labels may change), or as first read when the cache has lost it.
func (s *Store) currentPool(ctx context.Context, st *poolState) *ipamv1.IPPool {
	pool := &ipamv1.IPPool{}
	if err := s.client.Get(ctx, client.ObjectKey{Name: st.name}, pool); err != nil {
		return st.pool
	}
	return pool
}

// poolRules applies the pool model (internal/ippool) to pool as config c uses it from this node,
// and returns why c may not claim from it, or nil:
//   - the controller's verdict: a pool that is not Ready (Invalid, say) hands out nothing;
//   - the overlapping-ranges mode, the reuse cool-down and the statefulSets mode recorded on the
//     pool, which c must agree with;
//   - the namespaceSelector and nodeSelector of the pool and of every pool of its network whose
//     window it overlaps, against the pod's namespace and this node.
//
// Refusals are configuration errors (CNI code 7) naming the pool and the rule; a failure to read
// the namespace or node is the API's (code 11).
func (s *Store) poolRules(ctx context.Context, pool *ipamv1.IPPool, c *ipam.Config) error {
	refuse := func(err error) error { return &ipam.ConfigError{Field: "pool", Value: pool.Name, Reason: err.Error()} }
	if err := ippool.Serving(pool); err != nil {
		return refuse(err)
	}
	if _, err := ippool.Resolve(pool, c); err != nil {
		return refuse(err)
	}
	parsed, err := ippool.Parse(pool)
	if err != nil {
		return refuse(err)
	}
	var peers ipamv1.IPPoolList
	if err := s.client.List(ctx, &peers, client.MatchingFields{poolNetworkField: pool.Spec.NetworkName}); err != nil {
		return apiFailure("list the IPPools of network "+pool.Spec.NetworkName, err)
	}
	governing := ippool.Governing(parsed, peers.Items)
	subject := ippool.Subject{Namespace: c.Pod.Namespace, Node: s.node}
	if ippool.SelectsNamespaces(governing) {
		if subject.Namespace == "" {
			return refuse(fmt.Errorf("the pool (or one it overlaps) has a namespaceSelector and CNI_ARGS carries no K8S_POD_NAMESPACE"))
		}
		if subject.NamespaceLabels, err = s.namespaceLabels(ctx, subject.Namespace); err != nil {
			return err
		}
	}
	if ippool.SelectsNodes(governing) {
		if subject.NodeLabels, err = s.nodeLabels(ctx); err != nil {
			return err
		}
	}
	if err := ippool.Admit(governing, subject); err != nil {
		return refuse(err)
	}
	return nil
}

// namespaceLabels returns the labels of the pod's namespace. The cache answers, from a
// metadata-only informer of namespaces that the first call starts (an agent whose pools select no
// namespaces never watches them); a namespace it has not seen yet is read from the API server.
func (s *Store) namespaceLabels(ctx context.Context, namespace string) (map[string]string, error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	err := s.retry(ctx, "read namespace "+namespace, func(ctx context.Context) error {
		err := s.client.Get(ctx, client.ObjectKey{Name: namespace}, ns)
		if apierrors.IsNotFound(err) {
			err = s.live.Get(ctx, client.ObjectKey{Name: namespace}, ns)
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, &ipam.ConfigError{Field: "K8S_POD_NAMESPACE", Value: namespace, Reason: "no such namespace"}
	}
	if err != nil {
		return nil, apiFailure("read namespace "+namespace, err)
	}
	return ns.Labels, nil
}

// nodeLabels returns the labels of this node, from the cache (which watches this node only) or,
// before the cache has seen it, from the API server.
func (s *Store) nodeLabels(ctx context.Context) (map[string]string, error) {
	node := &corev1.Node{}
	err := s.retry(ctx, "read node "+s.node, func(ctx context.Context) error {
		err := s.client.Get(ctx, client.ObjectKey{Name: s.node}, node)
		if apierrors.IsNotFound(err) {
			err = s.live.Get(ctx, client.ObjectKey{Name: s.node}, node)
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, &ipam.ConfigError{Field: "node", Value: s.node,
			Reason: "no Node object of that name, so a pool's nodeSelector cannot admit it"}
	}
	if err != nil {
		return nil, apiFailure("read node "+s.node, err)
	}
	return node.Labels, nil
}
