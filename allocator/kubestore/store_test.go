package kubestore

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/poll"
)

// TestStore runs the store's user stories on one real API server. Each subtest uses its own ranges,
// so they do not see each other's pools.
func TestStore(t *testing.T) {
	env := envtest.Shared(t)
	a := &node{store: MustStart(t, env, "node-a", Options{}, nil)}
	b := &node{store: MustStart(t, env, "node-b", Options{}, nil)}

	t.Run("two nodes of one pool draw from distinct slices", func(t *testing.T) {
		c := conf("net1", `,"range":"10.30.0.0/24"`)
		seen := map[netip.Addr]string{}
		for i := range 20 {
			for _, n := range []*node{a, b} {
				id := n.store.Node() + "-c" + string(rune('a'+i))
				addr := n.mustAdd(t, c, id)
				if prev, dup := seen[addr]; dup {
					t.Fatalf("%s got %s, already held by %s", id, addr, prev)
				}
				seen[addr] = id
			}
		}
		var slices ipamv1.IPPoolSliceList
		if err := env.Client.List(context.Background(), &slices); err != nil {
			t.Fatal(err)
		}
		owner := map[string]netip.Prefix{} // node -> one of its blocks
		blocks := map[string][]netip.Prefix{}
		for _, sl := range slices.Items {
			if sl.Spec.Pool != "10.30.0.0-24" {
				continue
			}
			p := netip.MustParsePrefix(sl.Spec.Range)
			blocks[sl.Spec.Node] = append(blocks[sl.Spec.Node], p)
			owner[sl.Spec.Node] = p
			if sl.Labels[ipamv1.NodeLabel] != sl.Spec.Node || sl.Labels[ipamv1.PoolLabel] != sl.Spec.Pool || p.Bits() != 28 {
				t.Errorf("slice %s = %+v %v", sl.Name, sl.Spec, sl.Labels)
			}
		}
		if len(blocks["node-a"]) != 2 || len(blocks["node-b"]) != 2 {
			t.Fatalf("blocks = %v, want two /28 per node for 20 addresses each", blocks)
		}
		for addr, id := range seen {
			n := id[:len("node-a")]
			in := false
			for _, p := range blocks[n] {
				in = in || p.Contains(addr)
			}
			if !in {
				t.Errorf("%s of %s is outside %s's blocks %v", addr, id, n, blocks[n])
			}
		}
	})

	t.Run("reservation records the pod and the networks", func(t *testing.T) {
		c := conf("net-pod", `,"range":"10.31.0.0/24","network_name":"blue"`)
		got, err := a.add(c, "K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod-1;K8S_POD_UID=uid-1;IgnoreUnknown=1", "c-pod")
		if err != nil {
			t.Fatal(err)
		}
		var r ipamv1.OverlappingRangeIPReservation
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "blue.10.31.0.1"}, &r); err != nil {
			t.Fatal(err)
		}
		want := ipamv1.OverlappingRangeIPReservationSpec{Address: "10.31.0.1", Pool: "blue-10.31.0.0-24", ContainerID: "c-pod",
			IfName: "net1", PodRef: "ns1/pod-1", PodUID: "uid-1", Node: "node-a", NetworkName: "blue"}
		if got[0].String() != "10.31.0.1" || !equality.Semantic.DeepEqual(r.Spec, want) || r.Annotations[ipamv1.NetworkAnnotation] != "net-pod" ||
			r.Labels[ipamv1.NodeLabel] != "node-a" || r.Labels[ipamv1.PoolLabel] != "blue-10.31.0.0-24" {
			t.Errorf("reservation = %+v %v %v", r.Spec, r.Labels, r.Annotations)
		}
		var pool ipamv1.IPPool
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "blue-10.31.0.0-24"}, &pool); err != nil {
			t.Fatal(err)
		}
		if pool.Spec.Range != "10.31.0.0/24" || pool.Spec.NetworkName != "blue" {
			t.Errorf("inline pool = %+v", pool.Spec)
		}
	})

	t.Run("CHECK, DEL and repeated DEL", func(t *testing.T) {
		cs := conf("net-del", `,"range":"10.32.0.0/24"`)
		addr := a.mustAdd(t, cs, "c1")
		c, _ := ipam.Load([]byte(cs), "", nil)
		bound, c, err := a.store.Bind(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := bound.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
		al := allocator.New(bound) // still usable: Close does not stop the shared store
		ctx := context.Background()
		owner := allocator.Owner{ContainerID: "c1", IfName: "net1"}
		if err := al.Check(ctx, c, owner, []netip.Addr{addr}); err != nil {
			t.Errorf("CHECK = %v", err)
		}
		if err := al.Check(ctx, c, owner, []netip.Addr{netip.MustParseAddr("10.32.0.99")}); !errors.Is(err, allocator.ErrCheckFailed) {
			t.Errorf("CHECK of a wrong address = %v", err)
		}
		// node-b does not know node-a's attachment: its DEL releases nothing.
		if rel, err := b.del(cs, "c1"); err != nil || len(rel) != 0 {
			t.Errorf("DEL on the other node = %v, %v", rel, err)
		}
		if rel, err := a.del(cs, "c1"); err != nil || len(rel) != 1 || rel[0].Addr != addr {
			t.Errorf("DEL = %v, %v", rel, err)
		}
		if len(reservations(t, env, client.MatchingLabels{ipamv1.PoolLabel: "10.32.0.0-24"})) != 0 {
			t.Error("reservation left after DEL")
		}
		if rel, err := a.del(cs, "c1"); err != nil || len(rel) != 0 {
			t.Errorf("repeated DEL = %v, %v", rel, err)
		}
		if err := al.Check(ctx, c, owner, nil); !errors.Is(err, allocator.ErrCheckFailed) {
			t.Errorf("CHECK after DEL = %v", err)
		}
	})

	t.Run("GC releases only this node's reservations of this network", func(t *testing.T) {
		net1 := conf("gc-net1", `,"range":"10.33.0.0/24"`)
		net2 := conf("gc-net2", `,"range":"10.33.0.0/24"`) // another CNI network sharing the pool
		for _, id := range []string{"keep", "stale1", "stale2"} {
			a.mustAdd(t, net1, id)
		}
		a.mustAdd(t, net2, "other-net")
		b.mustAdd(t, net1, "other-node")
		c, _ := ipam.Load([]byte(net1), "", nil)
		al, c, err := a.bind(c)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := al.GC(context.Background(), c, []allocator.Owner{{ContainerID: "keep", IfName: "net1"}})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rel {
			ids = append(ids, r.Owner.ContainerID)
		}
		if strings.Join(ids, ",") != "stale1,stale2" {
			t.Errorf("GC released %v, want stale1,stale2", ids)
		}
		left := map[string]bool{}
		for _, r := range reservations(t, env, client.MatchingLabels{ipamv1.PoolLabel: "10.33.0.0-24"}) {
			left[r.Spec.ContainerID] = true
		}
		if len(left) != 3 || !left["keep"] || !left["other-net"] || !left["other-node"] {
			t.Errorf("left after GC: %v", left)
		}
	})

	t.Run("requested static address", func(t *testing.T) {
		cs := conf("net-static", `,"range":"10.34.0.0/24"`)
		withIP := func(ip string) string {
			return strings.Replace(cs, `"ipam"`, `"runtimeConfig":{"ips":["`+ip+`/24"]},"ipam"`, 1)
		}
		got, err := b.add(withIP("10.34.0.77"), "", "s1")
		if err != nil || got[0].String() != "10.34.0.77" {
			t.Fatalf("static ADD = %v, %v", got, err)
		}
		// Held by node-b: node-a learns it from the API server, node-b from its index.
		for _, n := range []*node{a, b} {
			_, err = n.add(withIP("10.34.0.77"), "", "s2")
			if !errors.Is(err, allocator.ErrAddressInUse) || !strings.Contains(err.Error(), "10.34.0.77 in pool 10.34.0.0-24 is held by s1/net1") {
				t.Errorf("%s: static ADD of a held address = %v", n.store.Node(), err)
			}
		}
		_, err = a.add(withIP("10.34.0.255"), "", "s3")
		if !errors.Is(err, allocator.ErrAddressNotAllowed) {
			t.Errorf("static ADD of the broadcast address = %v", err)
		}
		// A dynamic ADD never hands out the static address.
		for i := range 80 {
			if addr := a.mustAdd(t, cs, "dyn"+string(rune('0'+i%10))+string(rune('a'+i/10))); addr.String() == "10.34.0.77" {
				t.Fatal("dynamic ADD handed out the static address")
			}
		}
	})

	t.Run("idempotent ADD, also after an agent restart", func(t *testing.T) {
		cs := conf("net-idem", `,"range":"10.35.0.0/24"`)
		first := a.mustAdd(t, cs, "same")
		if again := a.mustAdd(t, cs, "same"); again != first {
			t.Errorf("repeated ADD = %s, want %s", again, first)
		}
		restarted := &node{store: MustStart(t, env, "node-a", Options{}, nil)}
		if again := restarted.mustAdd(t, cs, "same"); again != first {
			t.Errorf("ADD after restart = %s, want %s", again, first)
		}
		// The restarted agent goes on with the node's block: no new one is claimed.
		if next := restarted.mustAdd(t, cs, "next"); !netip.MustParsePrefix("10.35.0.0/28").Contains(next) || next == first {
			t.Errorf("ADD of a new attachment after restart = %s, want another address of the node's block", next)
		}
		var sl ipamv1.IPPoolSliceList
		if err := env.Client.List(context.Background(), &sl, client.MatchingFields{"spec.pool": "10.35.0.0-24"}); err != nil || len(sl.Items) != 1 {
			t.Errorf("%d slices after restart (%v), want the one claimed before", len(sl.Items), err)
		}
		if _, err := restarted.del(cs, "next"); err != nil {
			t.Fatal(err)
		}
		if n := len(reservations(t, env, client.MatchingLabels{ipamv1.PoolLabel: "10.35.0.0-24"})); n != 1 {
			t.Errorf("%d reservations for one attachment", n)
		}
		// DEL then ADD at once: the index, not the lagging cache, answers.
		for range 5 {
			if _, err := a.del(cs, "same"); err != nil {
				t.Fatal(err)
			}
			a.mustAdd(t, cs, "same")
		}
		if n := len(reservations(t, env, client.MatchingLabels{ipamv1.PoolLabel: "10.35.0.0-24"})); n != 1 {
			t.Errorf("%d reservations for one attachment after DEL/ADD cycles", n)
		}
	})

	t.Run("overlapping pools of one network never share an address", func(t *testing.T) {
		wide := conf("net-wide", `,"range":"10.36.0.0/24"`)
		narrow := conf("net-narrow", `,"range":"10.36.0.0/26"`)
		seen := map[netip.Addr]string{}
		narrowFull := false
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 30 {
			for _, x := range []struct {
				n          *node
				conf, kind string
			}{{a, wide, "w"}, {b, narrow, "n"}, {b, wide, "w"}, {a, narrow, "n"}} {
				wg.Go(func() {
					id := fmt.Sprintf("%s-%s%d", x.n.store.Node(), x.kind, i)
					got, err := x.n.add(x.conf, "", id)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						if x.kind == "n" && errors.Is(err, allocator.ErrPoolExhausted) {
							narrowFull = true
							return
						}
						t.Error(err)
						return
					}
					if prev, dup := seen[got[0]]; dup {
						t.Errorf("%s and %s both hold %s", prev, id, got[0])
					}
					seen[got[0]] = id
				})
			}
		}
		wg.Wait()
		// The /26 is exhausted only when every one of its 62 addresses (.1-.62) is held, by either pool.
		inNarrow := 0
		for addr := range seen {
			if addr.Compare(netip.MustParseAddr("10.36.0.1")) >= 0 && addr.Compare(netip.MustParseAddr("10.36.0.62")) <= 0 {
				inNarrow++
			}
		}
		if narrowFull && inNarrow != 62 {
			t.Errorf("the /26 was reported exhausted with %d of its 62 addresses held", inNarrow)
		}
		count := map[string]int{}
		for _, id := range seen {
			count[id[7:8]]++ // "node-a-w3": the kind
		}
		if count["w"] != 60 || (!narrowFull && count["n"] != 60) {
			t.Errorf("succeeded: %d of 60 in the /24, %d of 60 in the /26 (exhausted: %v)", count["w"], count["n"], narrowFull)
		}
		// Two different network_names scope addresses apart: both get the first address.
		red, err := a.add(conf("net-red", `,"range":"10.37.0.0/24","network_name":"red"`), "", "r1")
		if err != nil {
			t.Fatal(err)
		}
		green, err := a.add(conf("net-green", `,"range":"10.37.0.0/24","network_name":"green"`), "", "g1")
		if err != nil {
			t.Fatal(err)
		}
		if red[0] != green[0] {
			t.Errorf("networks red and green got %s and %s; different network_names may reuse an address", red[0], green[0])
		}
	})

	t.Run("dual-stack ADD failing on its second range leaves nothing", func(t *testing.T) {
		base := `,"range":"10.38.0.0/24","ipRanges":[{"range":"fd38::/64"}]`
		b.mustAdd(t, conf("net-ds", base), "holder") // holds 10.38.0.1 and fd38::1
		cs := strings.Replace(conf("net-ds", base), `"ipam"`, `"runtimeConfig":{"ips":["fd38::1"]},"ipam"`, 1)
		_, err := a.add(cs, "", "loser")
		if !errors.Is(err, allocator.ErrAddressInUse) {
			t.Fatalf("ADD = %v, want address in use", err)
		}
		for _, r := range reservations(t, env) {
			if r.Spec.ContainerID == "loser" {
				t.Errorf("rollback left %s (%s)", r.Name, r.Spec.Address)
			}
		}
		if got, err := a.add(conf("net-ds", base), "", "loser"); err != nil || len(got) != 2 {
			t.Errorf("ADD after the rollback = %v, %v", got, err)
		}
	})

	t.Run("referenced pool and its namespaceSelector", func(t *testing.T) {
		ctx := context.Background()
		pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "ops-blue"}, Spec: ipamv1.IPPoolSpec{
			Range: "10.39.0.0/24", RangeStart: "10.39.0.10", Gateway: "10.39.0.1", Exclude: []string{"10.39.0.11"}, NetworkName: "ops",
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "blue"}},
		}}
		for _, obj := range []client.Object{
			pool,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-blue", Labels: map[string]string{"team": "blue"}}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-red", Labels: map[string]string{"team": "red"}}},
		} {
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
		ref := conf("net-ref", `,"pool":"ops-blue"`)
		c, err := ipam.Load([]byte(ref), "K8S_POD_NAMESPACE=ns-blue;K8S_POD_NAME=p", nil)
		if err != nil {
			t.Fatal(err)
		}
		al, c, err := a.bind(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := al.Add(ctx, c, allocator.Owner{ContainerID: "r1", IfName: "net1"})
		if err != nil || got[0].Addr.String() != "10.39.0.10" || c.Ranges[0].Gateway.String() != "10.39.0.1" || c.NetworkName != "ops" {
			t.Fatalf("ADD from the referenced pool = %v, %v (ranges %v)", got, err, c.Ranges)
		}
		got, err = al.Add(ctx, c, allocator.Owner{ContainerID: "r2", IfName: "net1"})
		if err != nil || got[0].Addr.String() != "10.39.0.12" {
			t.Errorf("second ADD = %v, %v, want 10.39.0.12 (10.39.0.11 excluded)", got, err)
		}
		// The namespaceSelector governs claims: ADD fails, and claims nothing.
		for _, tt := range []struct{ name, args, want string }{
			{"namespace not admitted", "K8S_POD_NAMESPACE=ns-red", `pool "ops-blue": IPPool ops-blue does not admit namespace ns-red: its namespaceSelector is "team=blue"`},
			{"no namespace", "", `pool "ops-blue": the pool (or one it overlaps) has a namespaceSelector and CNI_ARGS carries no K8S_POD_NAMESPACE`},
			{"unknown namespace", "K8S_POD_NAMESPACE=ns-none", `K8S_POD_NAMESPACE "ns-none": no such namespace`},
		} {
			t.Run(tt.name, func(t *testing.T) {
				c, err := ipam.Load([]byte(ref), tt.args, nil)
				if err != nil {
					t.Fatal(err)
				}
				al, c, err := a.bind(c)
				if err != nil {
					t.Fatal(err)
				}
				_, err = al.Add(ctx, c, allocator.Owner{ContainerID: "r9", IfName: "net1"})
				if !errors.Is(err, ipam.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("ADD = %v, want a config error containing %q", err, tt.want)
				}
			})
		}
		// DEL needs no namespace: a runtime that sends DEL without the pod's CNI_ARGS must not leak.
		noPod, err := ipam.Load([]byte(ref), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		al, noPod, err = a.bind(noPod)
		if err != nil {
			t.Fatal(err)
		}
		released, err := al.Del(ctx, noPod, allocator.Owner{ContainerID: "r2", IfName: "net1"})
		if err != nil || len(released) != 1 || released[0].Addr.String() != "10.39.0.12" {
			t.Errorf("DEL without K8S_POD_NAMESPACE = %v, %v, want 10.39.0.12 released", released, err)
		}
		for _, tt := range []struct{ name, conf, args, want string }{
			{"no such pool", conf("net-ref", `,"pool":"ops-none"`), "K8S_POD_NAMESPACE=ns-blue", `pool "ops-none": no IPPool of that name`},
			{"network_name differs", conf("net-ref", `,"pool":"ops-blue","network_name":"other"`), "K8S_POD_NAMESPACE=ns-blue", `network_name "other": differs from the networkName "ops" of IPPool ops-blue`},
			{"requested outside", strings.Replace(ref, `"ipam"`, `"runtimeConfig":{"ips":["10.40.0.5"]},"ipam"`, 1), "K8S_POD_NAMESPACE=ns-blue", `requested IP "10.40.0.5": is not inside IPPool ops-blue (10.39.0.0/24)`},
			{"two requested", strings.Replace(ref, `"ipam"`, `"runtimeConfig":{"ips":["10.39.0.5","10.39.0.6"]},"ipam"`, 1), "K8S_POD_NAMESPACE=ns-blue", `requested IP "10.39.0.6": and 10.39.0.5 are both in IPPool ops-blue`},
		} {
			t.Run(tt.name, func(t *testing.T) {
				c, err := ipam.Load([]byte(tt.conf), tt.args, nil)
				if err != nil {
					t.Fatal(err)
				}
				_, _, err = a.store.Bind(c)
				if !errors.Is(err, ipam.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("Bind = %v, want a config error containing %q", err, tt.want)
				}
			})
		}
	})

	t.Run("a pool whose sliceSize carves too many blocks", func(t *testing.T) {
		pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "ops-v6"}, Spec: ipamv1.IPPoolSpec{Range: "fd00:48::/48", SliceSize: 120}}
		if err := env.Client.Create(context.Background(), pool); err != nil {
			t.Fatal(err)
		}
		c, err := ipam.Load([]byte(conf("net-v6", `,"pool":"ops-v6"`)), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = a.store.Bind(c)
		if !errors.Is(err, ipam.ErrInvalidConfig) || !strings.Contains(err.Error(), "sliceSize 120 carves range fd00:48::/48 into more than 2^63 slices") {
			t.Errorf("Bind = %v", err)
		}
	})

	t.Run("inline pool whose name is taken by another range", func(t *testing.T) {
		taken := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "10.41.0.0-24"}, Spec: ipamv1.IPPoolSpec{Range: "10.141.0.0/24"}}
		if err := env.Client.Create(context.Background(), taken); err != nil {
			t.Fatal(err)
		}
		_, err := a.add(conf("net-clash", `,"range":"10.41.0.0/24"`), "", "x")
		if !errors.Is(err, ipam.ErrInvalidConfig) || !strings.Contains(err.Error(), `IPPool 10.41.0.0-24 already exists for range 10.141.0.0/24 of network "", not range 10.41.0.0/24`) {
			t.Errorf("ADD = %v", err)
		}
	})

	t.Run("a pool is exhausted exactly at capacity across two nodes", func(t *testing.T) {
		cs := conf("net-full", `,"range":"10.42.0.0/28"`) // 14 addresses
		var mu sync.Mutex
		var wg sync.WaitGroup
		held := map[netip.Addr]string{}
		var exhausted []error
		for i := range 10 {
			for _, n := range []*node{a, b} {
				wg.Go(func() {
					id := fmt.Sprintf("%s-%d", n.store.Node(), i)
					got, err := n.add(cs, "", id)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case errors.Is(err, allocator.ErrPoolExhausted):
						exhausted = append(exhausted, err)
					case err != nil:
						t.Error(err)
					default:
						if prev, dup := held[got[0]]; dup {
							t.Errorf("%s and %s both hold %s", prev, id, got[0])
						}
						held[got[0]] = id
					}
				})
			}
		}
		wg.Wait()
		if len(held) != 14 || len(exhausted) != 6 {
			t.Fatalf("%d ADDs succeeded and %d found the pool exhausted, want 14 and 6", len(held), len(exhausted))
		}
		want := "pool exhausted: no free address in IPPool 10.42.0.0-28 (window 10.42.0.1-10.42.0.14, capacity 14): every address is reserved; see kubectl describe ippools.ipam.netpool.io 10.42.0.0-28"
		if exhausted[0].Error() != want {
			t.Errorf("error = %q, want %q", exhausted[0], want)
		}
		c, _ := ipam.Load([]byte(cs), "", nil)
		for _, n := range []*node{a, b} {
			al, c, err := n.bind(c)
			if err != nil {
				t.Fatal(err)
			}
			if err := al.Status(context.Background(), c); !errors.Is(err, allocator.ErrPoolExhausted) {
				t.Errorf("STATUS on %s of a full pool = %v", n.store.Node(), err)
			}
		}
		// One DEL on node-a frees an address node-b can take, wherever its blocks are.
		for addr, id := range held {
			if strings.HasPrefix(id, "node-a") {
				if _, err := a.del(cs, id); err != nil {
					t.Fatal(err)
				}
				al, c, _ := b.bind(c)
				if err := al.Status(context.Background(), c); err != nil {
					t.Errorf("STATUS after a DEL = %v", err)
				}
				if got := b.mustAdd(t, cs, "late"); got != addr {
					t.Errorf("node-b got %s, want the freed %s", got, addr)
				}
				break
			}
		}
	})

	t.Run("a node borrows from another node's block when every block is claimed", func(t *testing.T) {
		// Two blocks of 16: node-a claims both, node-b must borrow.
		pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "ops-borrow"}, Spec: ipamv1.IPPoolSpec{Range: "10.43.0.0/27", SliceSize: 28}}
		if err := env.Client.Create(context.Background(), pool); err != nil {
			t.Fatal(err)
		}
		cs := conf("net-borrow", `,"pool":"ops-borrow"`)
		held := map[netip.Addr]bool{}
		for i := range 20 {
			held[a.mustAdd(t, cs, fmt.Sprintf("a%d", i))] = true
		}
		for i := range 10 {
			addr := b.mustAdd(t, cs, fmt.Sprintf("b%d", i))
			if held[addr] {
				t.Fatalf("node-b got %s, held by node-a", addr)
			}
			held[addr] = true
		}
		if len(held) != 30 {
			t.Fatalf("%d distinct addresses, want the pool's 30", len(held))
		}
		var slices ipamv1.IPPoolSliceList
		if err := env.Client.List(context.Background(), &slices, client.MatchingFields{"spec.pool": "ops-borrow"}); err != nil {
			t.Fatal(err)
		}
		for _, sl := range slices.Items {
			if sl.Spec.Node != "node-a" {
				t.Errorf("slice %s belongs to %s", sl.Name, sl.Spec.Node)
			}
		}
		for _, n := range []*node{a, b} {
			if _, err := n.add(cs, "", "one-too-many"); !errors.Is(err, allocator.ErrPoolExhausted) {
				t.Errorf("ADD on %s of a full pool = %v", n.store.Node(), err)
			}
		}
		// Emptying node-a's second block gives it back; its first block stays.
		for i := 15; i < 20; i++ {
			if _, err := a.del(cs, fmt.Sprintf("a%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		poll.Eventually(t, 10*time.Second, "node-a's emptied block is given back", func() error {
			var l ipamv1.IPPoolSliceList
			if err := env.Client.List(context.Background(), &l, client.MatchingFields{"spec.pool": "ops-borrow"}); err != nil {
				return err
			}
			if len(l.Items) != 1 || l.Items[0].Spec.Range != "10.43.0.0/28" {
				return fmt.Errorf("slices %+v, want 10.43.0.0/28 alone", l.Items)
			}
			return nil
		})
	})
}
