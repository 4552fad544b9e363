package kubestore

import (
	"context"
	"fmt"
	"math/big"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// maxExclude is the IPPool API's limit on spec.exclude entries.
const maxExclude = 256

// poolState is what this node knows of one pool. Everything below lock is read and written only
// with lock held (the node-local lock: one allocation of the node per pool at a time).
type poolState struct {
	name string
	geo  geometry
	lock chan struct{}
	// pool is the IPPool as first read; its range and sliceSize cannot change.
	pool *ipamv1.IPPool

	// loaded is set once the node's slices of the pool have been read from the cache.
	loaded bool
	// slices are the node's blocks of the pool, in index order.
	slices []ownSlice
	// cursor is the last address this node claimed in the pool (round-robin).
	cursor netip.Addr
	// foreign are reservation names found held by others (AlreadyExists) inside the node's blocks.
	foreign map[string]bool
	// full marks blocks found without a free address, with the part of the block that was scanned;
	// a release in the block clears it.
	full map[uint64]ipam.Interval
	// inflight are the candidates being created right now, by reservation name, so that the
	// node's concurrent ADDs choose different addresses.
	inflight map[string]netip.Addr
}

// ownSlice is one block the node owns.
type ownSlice struct {
	index  uint64
	name   string
	prefix netip.Prefix
}

// poolStateFor returns the state of a pool already bound by resolvePoolRef.
func (s *Store) poolStateFor(name string) *poolState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pools[name]
}

// ensureInlinePool returns the pool of range r of an inline (whereabouts-style) config, creating
// its IPPool under PoolName(network_name, subnet) on first use. An existing pool of that name must
// have the same range and network name.
func (s *Store) ensureInlinePool(ctx context.Context, c *ipam.Config, r ipam.Range) (*poolState, error) {
	name := ipamv1.PoolName(c.NetworkName, r.Subnet)
	if st := s.poolStateFor(name); st != nil {
		return st, nil // checked when it was first read; Bind checks the namespaceSelector
	}
	pool := &ipamv1.IPPool{}
	err := s.retry(ctx, "read IPPool "+name, func(ctx context.Context) error {
		return s.client.Get(ctx, client.ObjectKey{Name: name}, pool)
	})
	if apierrors.IsNotFound(err) {
		pool = inlinePool(name, c.NetworkName, r)
		err = s.retry(ctx, "create IPPool "+name, func(ctx context.Context) error {
			return s.client.Create(ctx, pool.DeepCopy())
		})
		if apierrors.IsAlreadyExists(err) {
			// Another node created it first (or an earlier attempt of ours did): read it back.
			err = s.retry(ctx, "read IPPool "+name, func(ctx context.Context) error {
				return s.live.Get(ctx, client.ObjectKey{Name: name}, pool)
			})
		}
	}
	if err != nil {
		return nil, apiFailure("use IPPool "+name, err)
	}
	if pool.Spec.Range != r.Subnet.String() || pool.Spec.NetworkName != c.NetworkName {
		return nil, &ipam.ConfigError{Field: "range", Value: r.Subnet.String(), Reason: fmt.Sprintf(
			"IPPool %s already exists for range %s of network %q, not range %s of network %q",
			name, pool.Spec.Range, pool.Spec.NetworkName, r.Subnet, c.NetworkName)}
	}
	g, err := newGeometry(r.Subnet, pool.Spec.SliceSize)
	if err != nil {
		return nil, &ipam.ConfigError{Field: "IPPool " + name, Value: pool.Spec.Range, Reason: err.Error()}
	}
	return s.poolState(pool, g), nil
}

// inlinePool is the IPPool a config's inline range describes. The window, exclusions and gateway
// are the first config's; configs sharing the pool may narrow it further, as in whereabouts.
func inlinePool(name, networkName string, r ipam.Range) *ipamv1.IPPool {
	p := &ipamv1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       ipamv1.IPPoolSpec{Range: r.Subnet.String(), NetworkName: networkName},
	}
	first, last := ipam.UsableBounds(r.Subnet)
	if r.Start != first {
		p.Spec.RangeStart = r.Start.String()
	}
	if r.End != last {
		p.Spec.RangeEnd = r.End.String()
	}
	if r.Gateway.IsValid() {
		p.Spec.Gateway = r.Gateway.String()
	}
	var exclude []string
	for _, iv := range r.Excluded {
		if iv.First == r.Gateway && iv.Last == r.Gateway {
			continue
		}
		exclude = append(exclude, iv.CIDRStrings()...)
	}
	if len(exclude) <= maxExclude {
		p.Spec.Exclude = exclude
	}
	return p
}

// resolvePoolRef reads the operator-made pool c references and fills c.Ranges (and an empty
// network_name) from it.
func (s *Store) resolvePoolRef(ctx context.Context, c *ipam.Config) error {
	pool := &ipamv1.IPPool{}
	err := s.retry(ctx, "read IPPool "+c.Pool, func(ctx context.Context) error {
		err := s.client.Get(ctx, client.ObjectKey{Name: c.Pool}, pool)
		if apierrors.IsNotFound(err) {
			// The cache may not have seen a pool created a moment ago.
			err = s.live.Get(ctx, client.ObjectKey{Name: c.Pool}, pool)
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return &ipam.ConfigError{Field: "pool", Value: c.Pool, Reason: "no IPPool of that name"}
	}
	if err != nil {
		return apiFailure("read IPPool "+c.Pool, err)
	}
	if c.NetworkName != "" && c.NetworkName != pool.Spec.NetworkName {
		return &ipam.ConfigError{Field: "network_name", Value: c.NetworkName,
			Reason: fmt.Sprintf("differs from the networkName %q of IPPool %s", pool.Spec.NetworkName, c.Pool)}
	}
	c.NetworkName = pool.Spec.NetworkName
	var gateway netip.Addr
	if pool.Spec.Gateway != "" {
		if gateway, err = netip.ParseAddr(pool.Spec.Gateway); err != nil {
			return &ipam.ConfigError{Field: "IPPool " + c.Pool + " gateway", Value: pool.Spec.Gateway, Reason: "not an IP address"}
		}
	}
	r, err := ipam.ParseRange("IPPool "+c.Pool, ipam.RangeSpec{
		Range: pool.Spec.Range, RangeStart: pool.Spec.RangeStart, RangeEnd: pool.Spec.RangeEnd, Exclude: pool.Spec.Exclude,
	}, gateway)
	if err != nil {
		return err
	}
	for _, a := range c.Requested {
		if !r.Subnet.Contains(a) {
			return &ipam.ConfigError{Field: "requested IP", Value: a.String(),
				Reason: fmt.Sprintf("is not inside IPPool %s (%s)", c.Pool, r.Subnet)}
		}
	}
	if len(c.Requested) > 1 {
		return &ipam.ConfigError{Field: "requested IP", Value: c.Requested[1].String(),
			Reason: fmt.Sprintf("and %s are both in IPPool %s; one address per range is handed out", c.Requested[0], c.Pool)}
	}
	g, err := newGeometry(r.Subnet, pool.Spec.SliceSize)
	if err != nil {
		return &ipam.ConfigError{Field: "IPPool " + c.Pool, Value: pool.Spec.Range, Reason: err.Error()}
	}
	c.Ranges = []ipam.Range{r}
	s.poolState(pool, g)
	return nil
}

// admission checks the pool's current namespaceSelector, which may change, against the pod's
// namespace: from the cache or, when the cache has lost the pool, from what was read before.
func (s *Store) admission(ctx context.Context, st *poolState, namespace string) error {
	pool := &ipamv1.IPPool{}
	if err := s.client.Get(ctx, client.ObjectKey{Name: st.name}, pool); err != nil {
		pool = st.pool
	}
	return s.admits(ctx, pool, namespace)
}

// admits checks the pool's namespaceSelector against the labels of the pod's namespace. The
// cache answers; a namespace it has not seen yet is read from the API server.
func (s *Store) admits(ctx context.Context, pool *ipamv1.IPPool, namespace string) error {
	if pool.Spec.NamespaceSelector == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(pool.Spec.NamespaceSelector)
	if err != nil {
		return &ipam.ConfigError{Field: "IPPool " + pool.Name + " namespaceSelector", Reason: err.Error()}
	}
	if namespace == "" {
		return &ipam.ConfigError{Field: "pool", Value: pool.Name,
			Reason: "the pool has a namespaceSelector and CNI_ARGS carries no K8S_POD_NAMESPACE"}
	}
	ns := &corev1.Namespace{}
	err = s.retry(ctx, "read namespace "+namespace, func(ctx context.Context) error {
		err := s.client.Get(ctx, client.ObjectKey{Name: namespace}, ns)
		if apierrors.IsNotFound(err) {
			err = s.live.Get(ctx, client.ObjectKey{Name: namespace}, ns)
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return &ipam.ConfigError{Field: "K8S_POD_NAMESPACE", Value: namespace, Reason: "no such namespace"}
	}
	if err != nil {
		return apiFailure("read namespace "+namespace, err)
	}
	if !sel.Matches(labels.Set(ns.Labels)) {
		return &ipam.ConfigError{Field: "pool", Value: pool.Name,
			Reason: fmt.Sprintf("namespace %s is not admitted by the pool's namespaceSelector (%s)", namespace, sel)}
	}
	return nil
}

// capacityText is the number of addresses a range can hand out, for messages.
func capacityText(r ipam.Range) string {
	if c := r.Capacity(); c.Cmp(big.NewInt(0)) >= 0 {
		return c.String()
	}
	return "0"
}
