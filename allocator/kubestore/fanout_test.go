package kubestore

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/apicount"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/poll"
)

const (
	slicesResource       = "ippoolslices"
	reservationsResource = "overlappingrangeipreservations"
)

// TestAnotherNodesWorkSendsNoEvents checks invariant 9 of DESIGN.md on the wire: while node A
// claims blocks and addresses, node B's watches of slices and reservations carry only B's own
// objects, and B's cache holds only its own slices.
//
// Events are filed by cause (apicount.ByNode: the event's type and its object's node), not counted
// between two snapshots: how many events B's own work sends it is not fixed (under load an event
// of B's first claim can land after any snapshot taken while B waits on another stream, and a
// watch that is re-established resends B's objects), but the target is exact: 0 events of another
// node's objects.
func TestAnotherNodesWorkSendsNoEvents(t *testing.T) {
	env := envtest.Shared(t)
	ctx := context.Background()
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "ops-fanout"}, Spec: ipamv1.IPPoolSpec{Range: "10.47.0.0/24", SliceSize: 30}}
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	cs := conf("net-fanout", `,"pool":"ops-fanout"`)
	countA, countB := apicount.New(), apicount.NewByCause(apicount.ByNode)
	a := &node{store: MustStart(t, env, "fan-a", Options{}, countA.Wrap)}
	b := &node{store: MustStart(t, env, "fan-b", Options{}, countB.Wrap)}

	b.mustAdd(t, cs, "b0")
	for i := range 12 { // blocks of 4 addresses: at least three blocks
		a.mustAdd(t, cs, fmt.Sprintf("a%d", i))
	}
	for i := 1; i <= 4; i++ { // B's first block is full after three more: B claims another
		b.mustAdd(t, cs, fmt.Sprintf("b%d", i))
	}
	var own ipamv1.IPPoolSliceList
	if err := env.Client.List(ctx, &own, client.MatchingFields{"spec.node": "fan-b", "spec.pool": "ops-fanout"}); err != nil {
		t.Fatal(err)
	}
	// Each watch delivers in resourceVersion order, and the counter reads an event before B's
	// informer decodes it: once B's cache holds its last slice (claimed after A's) and b4's
	// reservation (created after A's), every event of A's work that B's watches would carry has
	// been counted. B's own events are waited for too, to show the counter sees what B receives.
	poll.Eventually(t, 60*time.Second, "node B's cache and counter show its own slices and reservations", func() error {
		var sls ipamv1.IPPoolSliceList
		if err := b.store.cache.List(ctx, &sls); err != nil {
			return err
		}
		var res ipamv1.OverlappingRangeIPReservationList
		if err := b.store.cache.List(ctx, &res); err != nil {
			return err
		}
		cached := map[string]bool{}
		for _, sl := range sls.Items {
			cached[sl.Name] = true
		}
		for _, sl := range own.Items {
			if !cached[sl.Name] {
				return fmt.Errorf("slice %s not in B's cache yet", sl.Name)
			}
		}
		if !slices.ContainsFunc(res.Items, func(r ipamv1.OverlappingRangeIPReservation) bool { return r.Spec.ContainerID == "b4" }) {
			return errors.New("b4's reservation not in B's cache yet")
		}
		c := countB.Snapshot()
		if n := c.Causes[slicesResource+" ADDED fan-b"]; n < len(own.Items) {
			return fmt.Errorf("%d events of B's own slices counted, want %d", n, len(own.Items))
		}
		if n := c.Causes[reservationsResource+" ADDED fan-b"]; n < 5 {
			return fmt.Errorf("%d events of B's own reservations counted, want 5", n)
		}
		return nil
	})
	got := countB.Snapshot()
	t.Logf("node B's watch events by cause: %v", got.Causes)
	for key, n := range got.Causes {
		resource, cause, _ := strings.Cut(key, " ")
		if resource != slicesResource && resource != reservationsResource {
			continue
		}
		if _, of, _ := strings.Cut(cause, " "); of != "fan-b" {
			t.Errorf("node B received %d %s events of %s, want none but of its own objects", n, resource, cause)
		}
	}
	var cached ipamv1.IPPoolSliceList
	if err := b.store.cache.List(ctx, &cached); err != nil {
		t.Fatal(err)
	}
	for _, sl := range cached.Items {
		if sl.Spec.Node != "fan-b" {
			t.Errorf("node B's cache holds slice %s of node %s", sl.Name, sl.Spec.Node)
		}
	}
	// A found B's first block taken once, and its other claims took a free block at once but for
	// the odd random landing on one of the few blocks held.
	var ofA ipamv1.IPPoolSliceList
	if err := env.Client.List(ctx, &ofA, client.MatchingFields{"spec.node": "fan-a", "spec.pool": "ops-fanout"}); err != nil {
		t.Fatal(err)
	}
	if creates := countA.Snapshot().Requests["POST "+slicesResource]; creates > len(ofA.Items)+4 {
		t.Errorf("node A made %d slice Creates for %d blocks", creates, len(ofA.Items))
	}
}

// TestCrowdedPoolListsSlicesOnce fills a pool of four blocks from two nodes that know only their
// own slices: the node that finds every block it knows of taken lists the pool's slices once, then
// borrows, and the pool is exhausted exactly at its capacity.
func TestCrowdedPoolListsSlicesOnce(t *testing.T) {
	env := envtest.Shared(t)
	ctx := context.Background()
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "ops-crowded"}, Spec: ipamv1.IPPoolSpec{Range: "10.48.0.0/28", SliceSize: 30}}
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	cs := conf("net-crowded", `,"pool":"ops-crowded"`)
	countA := apicount.New()
	a := &node{store: MustStart(t, env, "crowd-a", Options{}, countA.Wrap)}
	b := &node{store: MustStart(t, env, "crowd-b", Options{}, nil)}
	held := map[netip.Addr]string{}
	add := func(n *node, id string) {
		t.Helper()
		addr := n.mustAdd(t, cs, id)
		if prev, dup := held[addr]; dup {
			t.Fatalf("%s got %s, held by %s", id, addr, prev)
		}
		held[addr] = id
	}
	for i := range 10 { // blocks 0-2: 10.48.0.1-10.48.0.11
		add(a, fmt.Sprintf("a%d", i))
	}
	add(b, "b0") // finds block 3 by probing
	if got := netip.MustParseAddr("10.48.0.12"); held[got] != "b0" {
		t.Fatalf("node B's first address is not %s: %v", got, held)
	}
	if n := countA.Snapshot().Requests["LIST "+slicesResource]; n != 0 {
		t.Errorf("node A listed the slices %d times while it found free blocks", n)
	}
	for i := 10; i < 13; i++ { // A's blocks are full and the last is B's: A lists, then borrows
		add(a, fmt.Sprintf("a%d", i))
	}
	if n := countA.Snapshot().Requests["LIST "+slicesResource]; n != 1 {
		t.Errorf("node A listed the slices %d times, want once before it borrowed", n)
	}
	if len(held) != 14 {
		t.Errorf("%d addresses held, want the pool's 14", len(held))
	}
	if _, err := a.add(cs, "", "one-too-many"); err == nil {
		t.Error("an ADD into the full pool succeeded")
	}
}

// TestNamespacesWatchedOnlyWhenSelected checks that an agent whose pools select no namespaces
// neither lists nor watches them, and that the first pool with a namespaceSelector starts one
// metadata-only watch whose answers admit and refuse as the labels say.
func TestNamespacesWatchedOnlyWhenSelected(t *testing.T) {
	env := envtest.Shared(t)
	ctx := context.Background()
	count := apicount.New()
	n := &node{store: MustStart(t, env, "ns-a", Options{}, count.Wrap)}
	n.mustAdd(t, conf("net-ns-plain", `,"range":"10.49.0.0/24"`), "plain")
	if c := count.Snapshot(); c.Watches["namespaces"] != 0 || c.Requests["LIST namespaces"] != 0 {
		t.Errorf("namespaces listed %d times and watched %d times without a namespaceSelector",
			c.Requests["LIST namespaces"], c.Watches["namespaces"])
	}
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "ns-team-a", Labels: map[string]string{"team": "a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ns-team-b", Labels: map[string]string{"team": "b"}}},
	} {
		if err := env.Client.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "ops-ns-selected"}, Spec: ipamv1.IPPoolSpec{Range: "10.49.1.0/24",
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}}
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	cs := conf("net-ns-selected", `,"pool":"ops-ns-selected"`)
	poll.Eventually(t, 30*time.Second, "the pool admits team a", func() error {
		_, err := n.add(cs, "K8S_POD_NAMESPACE=ns-team-a;K8S_POD_NAME=p", "team-a")
		return err
	})
	if _, err := n.add(cs, "K8S_POD_NAMESPACE=ns-team-b;K8S_POD_NAME=p", "team-b"); err == nil ||
		!strings.Contains(err.Error(), "does not admit namespace ns-team-b") {
		t.Errorf("ADD from team b = %v, want the namespaceSelector's refusal", err)
	}
	c := count.Snapshot()
	if c.Watches["namespaces"] != 1 || c.Requests["LIST namespaces"] > 1 {
		t.Errorf("namespaces listed %d times and watched %d times, want one watch", c.Requests["LIST namespaces"], c.Watches["namespaces"])
	}
	var cached metav1.PartialObjectMetadataList
	cached.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := n.store.cache.List(ctx, &cached); err != nil || len(cached.Items) < 2 {
		t.Errorf("the agent's namespaces: %d, %v; want them as metadata", len(cached.Items), err)
	}
}
