package kubestore

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"sort"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
	"github.com/netpool/netpool/test/envtest"
)

// MustStart returns a started Store for node on env, stopped when the test ends. wrap, when not
// nil, wraps the store's HTTP transport (fault injection).
func MustStart(t *testing.T, env *envtest.Env, node string, opts Options, wrap func(rt http.RoundTripper) http.RoundTripper) *Store {
	t.Helper()
	s, _ := startStoppable(t, env, node, opts, wrap)
	return s
}

// startStoppable is MustStart that also returns the store's stop, as an agent's end: its cache
// and background loops stop.
func startStoppable(t *testing.T, env *envtest.Env, node string, opts Options, wrap func(rt http.RoundTripper) http.RoundTripper) (*Store, context.CancelFunc) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	if wrap != nil {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return wrap(rt) })
	}
	opts.NodeName = node
	s, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// Start's context runs the cache for the store's life, so the bound on syncing cancels it
	// only while Start waits.
	stuck := time.AfterFunc(30*time.Second, cancel)
	err = s.Start(ctx)
	stuck.Stop()
	if err != nil {
		t.Fatal(err)
	}
	return s, cancel
}

// node is one simulated node: its store and an allocator over it.
type node struct {
	store *Store
}

// bind binds the node's store to c and returns an allocator over it and the resolved config.
func (n *node) bind(c *ipam.Config) (*allocator.Allocator, *ipam.Config, error) {
	b, resolved, err := n.store.Bind(c)
	if err != nil {
		return nil, nil, err
	}
	return allocator.New(b), resolved, nil
}

// add runs an ADD of owner id/ifName with the config and returns its addresses.
func (n *node) add(conf string, args string, id string) ([]netip.Addr, error) {
	c, err := ipam.Load([]byte(conf), args, nil)
	if err != nil {
		return nil, err
	}
	a, c, err := n.bind(c)
	if err != nil {
		return nil, err
	}
	allocs, err := a.Add(context.Background(), c, allocator.Owner{ContainerID: id, IfName: "net1"})
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, len(allocs))
	for i, al := range allocs {
		out[i] = al.Addr
	}
	return out, nil
}

func (n *node) mustAdd(t *testing.T, conf, id string) netip.Addr {
	t.Helper()
	got, err := n.add(conf, "", id)
	if err != nil {
		t.Fatalf("ADD %s on %s: %v", id, n.store.Node(), err)
	}
	return got[0]
}

func (n *node) del(conf, id string) ([]allocator.Allocation, error) {
	c, err := ipam.Load([]byte(conf), "", nil)
	if err != nil {
		return nil, err
	}
	a, c, err := n.bind(c)
	if err != nil {
		return nil, err
	}
	return a.Del(context.Background(), c, allocator.Owner{ContainerID: id, IfName: "net1"})
}

func conf(name, ipamExtra string) string {
	return fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"ipam":{"type":"netpool","datastore":"kubernetes"%s}}`, name, ipamExtra)
}

// reservations lists every reservation in the cluster, live, by address text.
func reservations(t *testing.T, env *envtest.Env, opts ...client.ListOption) []ipamv1.OverlappingRangeIPReservation {
	t.Helper()
	var list ipamv1.OverlappingRangeIPReservationList
	if err := env.Client.List(context.Background(), &list, opts...); err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}
