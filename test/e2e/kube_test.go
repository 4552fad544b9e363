package e2e

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/envtest"
)

// TestKubernetesMode runs netpool in Kubernetes mode end to end: a real kube-apiserver and etcd,
// two node agents (node-a and node-b, each with its own socket), and the real netpool plugin
// binary chained after bridge through libcni, in real network namespaces. Each simulated node is
// a host namespace with its own bridge; both draw from one inline /24.
//
// It shows that pods on the two nodes get distinct addresses from distinct node-owned slices, that
// two pods on one bridge talk TCP both ways, that CHECK passes, that a requested static IP
// (runtimeConfig.ips through the "ips" capability, as Multus passes it) is honoured and recorded
// with the pod from CNI_ARGS, that a taken address is refused, that DEL removes the reservation
// from the API server, and that GC releases a leaked attachment of its own node only.
func TestKubernetesMode(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ctx := testContext(t)
	env := envtest.Shared(t)

	const (
		network = "e2e-kube"
		subnet  = "10.78.0.0/24"
		pool    = "10.78.0.0-24" // ipamv1.PoolName("", subnet): the inline pool's name
	)
	gateway := netip.MustParseAddr("10.78.0.1")
	fields := map[string]any{"range": subnet, "gateway": gateway.String()}
	sockA, sockB := mustAgent(t, env, "node-a"), mustAgent(t, env, "node-b")
	hostA, hostB := mustNetNS(t), mustNetNS(t)
	confA := kubeConflist(t, network, "np-kbra", sockA, fields)
	confB := kubeConflist(t, network, "np-kbrb", sockB, fields)
	nodeA, nodeB := mustNetwork(t, hostA, confA, nil), mustNetwork(t, hostB, confB, nil)
	// lostA and lostB share the plugins and the agents but have their own libcni caches: they
	// stand for runtimes that crashed and forgot their attachments.
	lostA, lostB := mustNetwork(t, hostA, confA, nil), mustNetwork(t, hostB, confB, nil)

	nsA1, nsA2, nsB1, nsS := mustNetNS(t), mustNetNS(t), mustNetNS(t), mustNetNS(t)
	a1 := podAttachment("kube-a1", nsA1, "eth0", "e2e", "pod-a1")
	a2 := podAttachment("kube-a2", nsA2, "eth0", "e2e", "pod-a2")
	b1 := podAttachment("kube-b1", nsB1, "eth0", "e2e", "pod-b1")

	assertStatus(ctx, t, nodeA, 0)
	resA1, resA2 := mustAdd(ctx, t, nodeA, a1), mustAdd(ctx, t, nodeA, a2)
	resB1 := mustAdd(ctx, t, nodeB, b1)
	got := map[string]netip.Prefix{}
	for id, res := range map[string]*current.Result{"kube-a1": resA1, "kube-a2": resA2, "kube-b1": resB1} {
		ips := resultIPs(t, res)
		if len(ips) != 1 || ips[0].Bits() != 24 || !netip.MustParsePrefix(subnet).Contains(ips[0].Addr()) || ips[0].Addr() == gateway {
			t.Fatalf("ADD %s got %v, want one address of %s at /24 other than the gateway", id, ips, subnet)
		}
		got[id] = ips[0]
	}
	if got["kube-a1"].Addr() == got["kube-a2"].Addr() || got["kube-a1"].Addr() == got["kube-b1"].Addr() || got["kube-a2"].Addr() == got["kube-b1"].Addr() {
		t.Fatalf("addresses are not distinct: %v", got)
	}
	assertGateway(t, resA1, gateway)
	assertGateway(t, resB1, gateway)

	// Each node allocated from blocks it holds, and the nodes hold distinct blocks.
	slices := nodeSlices(t, env, pool)
	for id, node := range map[string]string{"kube-a1": "node-a", "kube-a2": "node-a", "kube-b1": "node-b"} {
		block, holder := sliceOf(slices, got[id].Addr())
		if holder != node {
			t.Errorf("%s (on %s) got %s from block %v held by %q", id, node, got[id].Addr(), block, holder)
		}
	}
	blockA, _ := sliceOf(slices, got["kube-a1"].Addr())
	blockB, _ := sliceOf(slices, got["kube-b1"].Addr())
	if blockA.Overlaps(blockB) {
		t.Errorf("node-a's block %s and node-b's block %s overlap", blockA, blockB)
	}
	t.Logf("node-a: %v in %s; node-b: %v in %s", got["kube-a1"], blockA, got["kube-b1"], blockB)

	assertKernelAddrs(t, nsA1, "eth0", []netip.Prefix{got["kube-a1"]})
	assertKernelAddrs(t, nsA2, "eth0", []netip.Prefix{got["kube-a2"]})
	assertKernelAddrs(t, nsB1, "eth0", []netip.Prefix{got["kube-b1"]})
	assertTCP(ctx, t, nsA2, got["kube-a2"].Addr(), nsA1, got["kube-a1"].Addr())
	assertTCP(ctx, t, nsA1, got["kube-a1"].Addr(), nsA2, got["kube-a2"].Addr())

	mustCheck(ctx, t, nodeA, a1)
	mustCheck(ctx, t, nodeA, a2)
	mustCheck(ctx, t, nodeB, b1)

	// The API server holds one reservation per attachment, with its node and pod.
	held := reservations(t, env, pool)
	for id, node := range map[string]string{"kube-a1": "node-a", "kube-a2": "node-a", "kube-b1": "node-b"} {
		r, ok := held[id]
		switch {
		case !ok:
			t.Errorf("no reservation for %s", id)
		case r.Spec.Address != got[id].Addr().String() || r.Spec.Node != node || r.Spec.IfName != "eth0" ||
			r.Spec.PodRef != "e2e/pod-"+strings.TrimPrefix(id, "kube-"):
			t.Errorf("reservation of %s = %+v", id, r.Spec)
		}
	}
	if len(held) != 3 {
		t.Errorf("reservations = %d, want 3", len(held))
	}

	t.Run("a requested static IP is honoured and recorded", func(t *testing.T) {
		static := netip.MustParseAddr("10.78.0.200")
		s1 := podAttachment("kube-s1", nsS, "eth0", "e2e", "pod-static")
		s1.CapabilityArgs = map[string]any{"ips": []string{static.String() + "/24"}}
		res := mustAdd(ctx, t, nodeB, s1)
		if ips := resultIPs(t, res); len(ips) != 1 || ips[0] != netip.PrefixFrom(static, 24) {
			t.Fatalf("ADD with ips [%s/24] got %v", static, ips)
		}
		assertKernelAddrs(t, nsS, "eth0", []netip.Prefix{netip.PrefixFrom(static, 24)})
		mustCheck(ctx, t, nodeB, s1)
		var r ipamv1.OverlappingRangeIPReservation
		if err := env.Client.Get(ctx, client.ObjectKey{Name: ipamv1.ReservationName("", static)}, &r); err != nil {
			t.Fatalf("reservation of %s: %v", static, err)
		}
		if r.Spec.Address != static.String() || r.Spec.ContainerID != "kube-s1" || r.Spec.PodRef != "e2e/pod-static" ||
			r.Spec.Node != "node-b" || r.Spec.Pool != pool {
			t.Errorf("reservation of %s = %+v", static, r.Spec)
		}

		// An address another pod holds (on the other node) is refused with its reason, and the
		// holder keeps it.
		taken := got["kube-a1"].Addr()
		nsT := mustNetNS(t)
		t1 := podAttachment("kube-t1", nsT, "eth0", "e2e", "pod-taken")
		t1.CapabilityArgs = map[string]any{"ips": []string{taken.String() + "/24"}}
		if res, err := nodeB.Add(ctx, t1); err == nil {
			t.Fatalf("ADD asking for %s, held by kube-a1, got %v", taken, res.IPs)
		} else if !strings.Contains(err.Error(), taken.String()) {
			t.Errorf("ADD asking for %s: %v, want an error naming the address", taken, err)
		} else {
			t.Logf("ADD asking for a taken address failed as expected: %v", err)
		}
		mustDel(ctx, t, nodeB, t1)
		if r := reservations(t, env, pool)["kube-a1"]; r.Spec.Address != taken.String() {
			t.Errorf("kube-a1's reservation after the refused request = %+v", r.Spec)
		}
		mustCheck(ctx, t, nodeA, a1)
	})

	t.Run("DEL removes the reservation from the API server", func(t *testing.T) {
		name := ipamv1.ReservationName("", got["kube-a2"].Addr())
		mustDel(ctx, t, nodeA, a2)
		mustDel(ctx, t, nodeA, a2) // DEL is idempotent
		err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &ipamv1.OverlappingRangeIPReservation{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("reservation %s after DEL: %v, want NotFound", name, err)
		}
		if _, ok := reservations(t, env, pool)["kube-a2"]; ok {
			t.Errorf("kube-a2 still holds a reservation after DEL")
		}
		mustCheck(ctx, t, nodeA, a1)
	})

	t.Run("GC releases a leaked attachment of its own node only", func(t *testing.T) {
		nsLA, nsLB := mustNetNS(t), mustNetNS(t)
		leakA := podAttachment("kube-leak-a", nsLA, "eth0", "e2e", "pod-leak-a")
		leakB := podAttachment("kube-leak-b", nsLB, "eth0", "e2e", "pod-leak-b")
		mustAdd(ctx, t, lostA, leakA)
		mustAdd(ctx, t, lostB, leakB)
		before := reservations(t, env, pool)
		for _, id := range []string{"kube-leak-a", "kube-leak-b"} {
			if _, ok := before[id]; !ok {
				t.Fatalf("no reservation for %s", id)
			}
		}

		// node-a's runtime lists kube-a1 only: node-b's attachments are not in its list, and must stay.
		if err := nodeA.GCIPAM(ctx, []types.GCAttachment{{ContainerID: a1.ContainerID, IfName: a1.IfName}}); err != nil {
			t.Fatalf("GC on node-a: %v", err)
		}
		after := reservations(t, env, pool)
		for _, id := range []string{"kube-a1", "kube-b1", "kube-s1", "kube-leak-b"} {
			if _, ok := after[id]; !ok {
				t.Errorf("GC on node-a released %s", id)
			}
		}
		if _, ok := after["kube-leak-a"]; ok {
			t.Errorf("GC on node-a kept its leaked kube-leak-a")
		}
		mustCheck(ctx, t, nodeA, a1)

		// node-b's turn: its leak goes, its valid attachments stay.
		valid := []types.GCAttachment{{ContainerID: b1.ContainerID, IfName: b1.IfName}, {ContainerID: "kube-s1", IfName: "eth0"}}
		if err := nodeB.GCIPAM(ctx, valid); err != nil {
			t.Fatalf("GC on node-b: %v", err)
		}
		after = reservations(t, env, pool)
		if _, ok := after["kube-leak-b"]; ok {
			t.Errorf("GC on node-b kept its leaked kube-leak-b")
		}
		if len(after) != 3 {
			t.Errorf("reservations after GC on both nodes: %v, want kube-a1, kube-b1 and kube-s1", keys(after))
		}
		mustCheck(ctx, t, nodeB, b1)
	})

	assertStatus(ctx, t, nodeA, 0)
	assertStatus(ctx, t, nodeB, 0)
	mustDel(ctx, t, nodeA, a1)
	mustDel(ctx, t, nodeB, b1)
	s1 := podAttachment("kube-s1", nsS, "eth0", "e2e", "pod-static")
	mustDel(ctx, t, nodeB, s1)
	if left := reservations(t, env, pool); len(left) != 0 {
		t.Errorf("reservations after DEL of every attachment: %v", keys(left))
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
