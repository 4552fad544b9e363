package kubestore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"regexp"
	"sync"
	"time"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/ippool"
	"github.com/netpool/netpool/internal/scheme"
	"github.com/netpool/netpool/ipam"
)

// Defaults of Options.
const (
	// DefaultAPITimeout bounds one store call while the API server does not answer.
	DefaultAPITimeout = 10 * time.Second
	// DefaultRetryInterval is the first wait between two attempts; it doubles up to a second.
	DefaultRetryInterval = 100 * time.Millisecond
	// DefaultResolveInterval is how often pending claims are looked at in the background.
	DefaultResolveInterval = time.Second
)

// Options configure a Store.
type Options struct {
	// NodeName is the node the store allocates for: its reservations and slices carry this name.
	NodeName string
	// APITimeout bounds each Update and View, lock wait and API retries included; 0 means
	// DefaultAPITimeout. The CNI call's own deadline (lock_timeout) bounds it too.
	APITimeout time.Duration
	// RetryInterval is the first wait between two attempts of a failed API call; 0 means
	// DefaultRetryInterval.
	RetryInterval time.Duration
	// ResolveInterval is how often pending claims are resolved in the background; 0 means
	// DefaultResolveInterval.
	ResolveInterval time.Duration
	// CoolingFlushDelay is how long after a release under a reuse cool-down its block's cooling
	// addresses are written to its IPPoolSlice (cooling.go); 0 means DefaultCoolingFlushDelay.
	CoolingFlushDelay time.Duration
	// Log receives what the store does on its own (background resolution); nil discards it.
	Log *slog.Logger
}

var nodeNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// Store is the Kubernetes state of one node: its client, cache, index and locks. It is not itself
// an allocator.Store, because which pools a call may touch (and how their reservations are named)
// depends on the call's config: one Store serves every CNI call of the node, and Bind returns the
// allocator.Store of one call.
type Store struct {
	node   string
	opts   Options
	log    *slog.Logger
	client client.Client // writes go to the API server; reads come from cache
	live   client.Reader // reads that must not be stale
	cache  cache.Cache
	index  *index
	reach  *reachability // when the API server last failed to answer

	mu     sync.Mutex
	pools  map[string]*poolState // by IPPool name
	owners map[allocator.Owner]*ownerLock
	// pending are Creates of reservations whose outcome is unknown.
	pending map[pendingClaim]struct{}
	// coolingKick wakes the writer of cooling records (coolingLoop).
	coolingKick chan struct{}
	// creating are the node's creations of inline pools in flight, by pool name.
	creating map[string]*poolCreation
}

// pendingClaim is a reservation that may or may not exist: its Create was sent and no answer came
// (or its rollback failed). It belongs to owner in pool until resolved.
type pendingClaim struct {
	name  string
	pool  string
	owner allocator.Owner
}

// restMapper maps the store's kinds without asking the API server, so a store can be made (and an
// agent started) while the API server is down; every kind is cluster-scoped.
func restMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{ipamv1.GroupVersion, corev1.SchemeGroupVersion})
	for _, kind := range []string{"IPPool", "IPPoolSlice", "OverlappingRangeIPReservation"} {
		m.Add(ipamv1.GroupVersion.WithKind(kind), meta.RESTScopeRoot)
	}
	m.Add(corev1.SchemeGroupVersion.WithKind("Namespace"), meta.RESTScopeRoot)
	m.Add(corev1.SchemeGroupVersion.WithKind("Node"), meta.RESTScopeRoot)
	m.Add(corev1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace)
	m.Add(ipamclaimsv1.SchemeGroupVersion.WithKind("IPAMClaim"), meta.RESTScopeNamespace)
	return m
}

// New returns a Store for opts.NodeName over the API server cfg points at. Call Start before use.
func New(cfg *rest.Config, opts Options) (*Store, error) {
	if !nodeNameRE.MatchString(opts.NodeName) || len(opts.NodeName) > 253 {
		return nil, fmt.Errorf("node name %q is not a valid Kubernetes node name", opts.NodeName)
	}
	if opts.APITimeout <= 0 {
		opts.APITimeout = DefaultAPITimeout
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = DefaultRetryInterval
	}
	if opts.ResolveInterval <= 0 {
		opts.ResolveInterval = DefaultResolveInterval
	}
	if opts.CoolingFlushDelay <= 0 {
		opts.CoolingFlushDelay = DefaultCoolingFlushDelay
	}
	kinds, err := scheme.New()
	if err != nil {
		return nil, err
	}
	reach := &reachability{}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(reach.wrap)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to build the HTTP client: %w", err)
	}
	mapper := restMapper()
	c, err := cache.New(cfg, cache.Options{
		HTTPClient: httpClient, Scheme: kinds, Mapper: mapper,
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			// Only this node's reservations: the index of what the node holds.
			&ipamv1.OverlappingRangeIPReservation{}: {
				Label: labels.SelectorFromSet(labels.Set{ipamv1.NodeLabel: ipamv1.LabelValue(opts.NodeName)}),
			},
			// Only this node: its labels answer the pools' nodeSelectors.
			&corev1.Node{}: {Field: fields.OneTermEqualSelector("metadata.name", opts.NodeName)},
			// Only this node's slices: its blocks. Another node's claim sends this node no event;
			// which blocks other nodes hold, the node learns by claiming (blocks.go). spec.node is
			// what the node-isolation policy checks against the agent's token.
			&ipamv1.IPPoolSlice{}: {Field: fields.OneTermEqualSelector(sliceNodeField, opts.NodeName)},
			// IPPools are watched whole: they are the cluster's configuration (their number does
			// not grow with nodes), and the agent needs their spec and Ready verdict. Namespaces are
			// watched only once a pool with a namespaceSelector is used, and then as metadata
			// (pool_rules.go): labels are all the agent reads of them.
		},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to build the cache: %w", err)
	}
	live, err := client.New(cfg, client.Options{HTTPClient: httpClient, Scheme: kinds, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("failed to build the client: %w", err)
	}
	cached, err := client.New(cfg, client.Options{HTTPClient: httpClient, Scheme: kinds, Mapper: mapper,
		Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		return nil, fmt.Errorf("failed to build the client: %w", err)
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		node: opts.NodeName, opts: opts, log: log.With("node", opts.NodeName),
		client: cached, live: live, cache: c, index: newIndex(), reach: reach,
		pools: map[string]*poolState{}, owners: map[allocator.Owner]*ownerLock{}, pending: map[pendingClaim]struct{}{},
		coolingKick: make(chan struct{}, 1), creating: map[string]*poolCreation{},
	}
	s.index.deletedElsewhere = s.cooledElsewhere
	return s, nil
}

// Start runs the cache until ctx ends and returns once it has synced, so that the index holds
// every reservation of the node before the first call is served.
func (s *Store) Start(ctx context.Context) error {
	inf, err := s.cache.GetInformer(ctx, &ipamv1.OverlappingRangeIPReservation{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("failed to watch reservations: %w", err)
	}
	reg, err := inf.AddEventHandler(s.index.handler())
	if err != nil {
		return fmt.Errorf("failed to watch reservations: %w", err)
	}
	err = s.cache.IndexField(ctx, &ipamv1.IPPoolSlice{}, slicePoolField, func(o client.Object) []string {
		return []string{o.(*ipamv1.IPPoolSlice).Spec.Pool}
	})
	if err != nil {
		return fmt.Errorf("failed to index slices: %w", err)
	}
	err = s.cache.IndexField(ctx, &ipamv1.IPPool{}, poolNetworkField, func(o client.Object) []string {
		return []string{o.(*ipamv1.IPPool).Spec.NetworkName}
	})
	if err != nil {
		return fmt.Errorf("failed to index pools: %w", err)
	}
	for _, obj := range []client.Object{&ipamv1.IPPoolSlice{}, &ipamv1.IPPool{}, &corev1.Node{}} {
		if _, err := s.cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false)); err != nil {
			return fmt.Errorf("failed to watch %T: %w", obj, err)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- s.cache.Start(ctx) }()
	synced := make(chan bool, 1)
	go func() {
		synced <- s.cache.WaitForCacheSync(ctx) && toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced)
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("failed to start the cache: %w", err)
	case ok := <-synced:
		if !ok {
			return fmt.Errorf("cache did not sync: %w", context.Cause(ctx))
		}
	}
	go s.resolveLoop(ctx)
	go s.coolingLoop(ctx)
	return nil
}

// Node returns the node the store allocates for.
func (s *Store) Node() string { return s.node }

// Pending returns how many claims have an unknown outcome; tests wait for it to reach 0.
func (s *Store) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// poolState returns the node's state of pool, creating it with g on first use.
func (s *Store) poolState(pool *ipamv1.IPPool, g geometry) *poolState {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pools[pool.Name]
	if p == nil {
		p = &poolState{name: pool.Name, geo: g, pool: pool, lock: make(chan struct{}, 1),
			foreign: map[string]bool{}, full: map[uint64]ipam.Interval{}, inflight: map[string]netip.Addr{}}
		p.cooling.changed = s.kickCooling
		s.pools[pool.Name] = p
	}
	return p
}

// callStore is the allocator.Store of one CNI call: the node's Store bound to the pools of one
// config, by allocator pool key.
type callStore struct {
	s     *Store
	pools map[string]*poolUse
	cfg   *ipam.Config // the resolved config of the call
	// claim is the attachment's IPAMClaim, once PersistentOwner has resolved it (claimResolved).
	claim         *claimUse
	claimResolved bool
	// sticky is whether the call's pools give StatefulSet pods their ordinal's address
	// (ippool.Resolve); a config that disagrees with its pool claims nothing (poolRules).
	sticky bool
}

// poolUse is one pool as one config uses it.
type poolUse struct {
	state   *poolState
	scope   string // ReservationName scope
	overlap bool   // scope is the network (enable_overlapping_ranges), not the pool
	// admit is why this call may not claim from this pool (poolRules: the pool's verdict, mode and
	// selectors), or nil. It is checked when an address is claimed, not when the call binds.
	admit       error
	networkName string // the NAD's network_name
	// cooldown is the pool's reuse cool-down (ippool.Resolve), 0 for none.
	cooldown time.Duration
}

var _ allocator.Store = (*callStore)(nil)

// Bind returns the store for one CNI call with config c, and the config resolved against the
// pools: for a reference to an operator-made pool, a copy of c whose Ranges (and empty
// network_name) come from the pool. c itself is never changed. Bind creates c's inline pools on
// first use, and applies each pool's rules (poolRules) to the call: a refusal is kept and returned
// when the call claims an address, so DEL, CHECK and GC still work. Close on the result does
// nothing: the Store outlives the call.
func (s *Store) Bind(c *ipam.Config) (allocator.Store, *ipam.Config, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.APITimeout)
	defer cancel()
	if c.Pool != "" {
		resolved, err := s.resolvePoolRef(ctx, c)
		if err != nil {
			return nil, nil, err
		}
		c = resolved
	} else if err := ippool.CheckDerivedCount(len(c.Ranges)); err != nil {
		return nil, nil, &ipam.ConfigError{Field: "ipRanges", Reason: err.Error()}
	}
	b := &callStore{s: s, pools: map[string]*poolUse{}, cfg: c}
	for i, r := range c.Ranges {
		var st *poolState
		if c.Pool != "" {
			st = s.poolStateFor(c.Pool)
		} else {
			var err error
			if st, err = s.ensureInlinePool(ctx, c, r); err != nil {
				return nil, nil, err
			}
		}
		pool := s.currentPool(ctx, st)
		// A config that disagrees with one of the pool's rules may claim nothing (poolRules), but
		// still releases by the rules Resolve gives it: its own scope, the pool's cool-down.
		rules, _ := ippool.Resolve(pool, c)
		if rules.Sticky {
			b.sticky = true
		}
		st.cooling.cooldown.Store(int64(rules.Cooldown))
		b.pools[c.PoolKey(i)] = &poolUse{state: st, networkName: c.NetworkName, overlap: rules.Overlapping,
			scope: ippool.ReservationScope(st.name, c.NetworkName, rules.Overlapping), admit: s.poolRules(ctx, pool, c),
			cooldown: rules.Cooldown}
	}
	return b, c, nil
}

func (b *callStore) Close() error { return nil }

// Update runs fn as one call. When fn fails, the reservations it created are deleted again, so a
// dual-stack ADD that fails on its second range leaves nothing behind; releases are not undone (DEL
// and GC are repeated by the runtime).
//
// Locking: a call holds the lock of the attachment it works on (one at a time) from its first use
// to its end, so two calls for one attachment never interleave. The node-local lock of a pool is
// held only while a candidate is chosen and the node's view of the pool changes, never across an
// API call: the Create that claims the candidate, a block's claim or give-back and borrowing's list
// run outside it, so one node's ADDs to one pool choose one after another but claim concurrently.
func (b *callStore) Update(ctx context.Context, fn func(context.Context, allocator.Txn) error) error {
	return b.run(ctx, true, fn)
}

// View runs fn with the same locks; its Txn refuses to claim or release. It is not a snapshot:
// each read sees the index and the API server as they are when it is made.
func (b *callStore) View(ctx context.Context, fn func(context.Context, allocator.Txn) error) error {
	return b.run(ctx, false, fn)
}

// run bounds the call by the store's APITimeout and hands fn that bound, which every Txn method
// then receives.
func (b *callStore) run(ctx context.Context, writable bool, fn func(context.Context, allocator.Txn) error) error {
	ctx, cancel := context.WithTimeout(ctx, b.s.opts.APITimeout)
	defer cancel()
	t := &txn{b: b, writable: writable}
	defer t.unlockOwner()
	if err := fn(ctx, t); err != nil {
		return errors.Join(err, t.rollback(ctx))
	}
	// The claim's status follows the addresses; the addresses stay whatever it comes to, and a
	// repeated ADD writes it again.
	if writable && b.claim != nil && b.claim.claim != nil && len(b.claim.bound) > 0 {
		return b.s.writeClaimStatus(ctx, b.claim)
	}
	return nil
}
