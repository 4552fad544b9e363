package e2e

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpool/netpool/test/envtest"
)

// TestMultusThin drives netpool through the real Multus thin plugin (built from the module proxy),
// as kubelet's runtime would: pods with k8s.v1.cni.cncf.io/networks annotations on a real API
// server, NADs that delegate to bridge with netpool in Kubernetes mode, two simulated nodes each
// with its own agent (seen by the node's Multus at /run/netpool/agent.sock, the default the NADs
// rely on), and real network namespaces.
//
// It covers several NADs per pod, a requested address through the "ips" capability and without it
// (Multus then passes it only as CNI_ARGS IP=), a taken address refused (Multus turns the delegate's
// error into code 999 and keeps netpool's message), the network-status Multus writes, and DEL.
func TestMultusThin(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ctx := testContext(t)
	env := envtest.Start(t)
	env.InstallNADCRD(t)
	const namespace = "mt"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	nodeA := mustMultusNode(t, env, "node-a", mustAgent(t, env, "node-a"), "10.85.1.0/24")
	nodeB := mustMultusNode(t, env, "node-b", mustAgent(t, env, "node-b"), "10.85.2.0/24")

	blueNet, greenNet := netip.MustParsePrefix("10.83.0.0/24"), netip.MustParsePrefix("10.84.0.0/24")
	// blue declares the "ips" capability, so Multus hands it requested addresses as runtimeConfig.ips
	// (and as CNI_ARGS IP=); green does not, so CNI_ARGS IP= is all it gets.
	mustNAD(ctx, t, env, namespace, "blue", map[string]any{
		"cniVersion": "1.1.0", "name": "blue",
		"plugins": []any{map[string]any{
			"type": "bridge", "bridge": "np-mblue", "isGateway": true,
			"capabilities": map[string]any{"ips": true},
			"ipam":         map[string]any{"type": "netpool", "datastore": "kubernetes", "range": blueNet.String(), "gateway": "10.83.0.1"},
		}},
	})
	mustNAD(ctx, t, env, namespace, "green", map[string]any{
		"cniVersion": "1.1.0", "name": "green",
		"plugins": []any{map[string]any{
			"type": "bridge", "bridge": "np-mgreen", "isGateway": true,
			"ipam": map[string]any{"type": "netpool", "datastore": "kubernetes", "range": greenNet.String(), "gateway": "10.84.0.1"},
		}},
	})

	both := []map[string]any{{"name": "blue"}, {"name": "green"}}
	staticBlue, staticGreen := netip.MustParseAddr("10.83.0.200"), netip.MustParseAddr("10.84.0.201")
	pod1 := mustPod(ctx, t, env, namespace, "pod-1", "node-a", both)
	pod2 := mustPod(ctx, t, env, namespace, "pod-2", "node-b", []map[string]any{
		{"name": "blue", "ips": []string{staticBlue.String() + "/24"}},
		{"name": "green", "ips": []string{staticGreen.String() + "/24"}},
	})
	pod3 := mustPod(ctx, t, env, namespace, "pod-3", "node-a", []map[string]any{{"name": "blue"}})
	ns1, ns2, ns3 := mustNetNS(t), mustNetNS(t), mustNetNS(t)
	rt1, rt2, rt3 := podRuntime(pod1, "mt-pod-1", ns1), podRuntime(pod2, "mt-pod-2", ns2), podRuntime(pod3, "mt-pod-3", ns3)

	mustAdd(ctx, t, nodeA.network, rt1)
	mustAdd(ctx, t, nodeB.network, rt2)
	mustAdd(ctx, t, nodeA.network, rt3)

	// Multus attached blue as net1 and green as net2, and netpool's addresses are in the kernel
	// and in the network-status Multus wrote.
	addrs := map[string]netip.Prefix{}
	for _, c := range []struct {
		pod    *corev1.Pod
		ifName string
		subnet netip.Prefix
	}{
		{pod1, "net1", blueNet}, {pod1, "net2", greenNet},
		{pod2, "net1", blueNet}, {pod2, "net2", greenNet},
		{pod3, "net1", blueNet},
	} {
		st, ok := podNetworkStatus(ctx, t, env, c.pod)[c.ifName]
		if !ok || len(st.IPs) != 1 {
			t.Fatalf("pod %s: network-status of %s = %+v, want one address", c.pod.Name, c.ifName, st)
		}
		a, err := netip.ParseAddr(st.IPs[0])
		if err != nil || !c.subnet.Contains(a) {
			t.Fatalf("pod %s %s: network-status address %q is not in %s", c.pod.Name, c.ifName, st.IPs[0], c.subnet)
		}
		addrs[c.pod.Name+"/"+c.ifName] = netip.PrefixFrom(a, 24)
	}
	assertKernelAddrs(t, ns1, "net1", []netip.Prefix{addrs["pod-1/net1"]})
	assertKernelAddrs(t, ns1, "net2", []netip.Prefix{addrs["pod-1/net2"]})
	assertKernelAddrs(t, ns2, "net1", []netip.Prefix{netip.PrefixFrom(staticBlue, 24)})
	assertKernelAddrs(t, ns2, "net2", []netip.Prefix{netip.PrefixFrom(staticGreen, 24)})
	assertKernelAddrs(t, ns3, "net1", []netip.Prefix{addrs["pod-3/net1"]})
	if addrs["pod-1/net1"] == addrs["pod-3/net1"] {
		t.Fatalf("pod-1 and pod-3 both got %s on blue", addrs["pod-1/net1"])
	}
	// The two pods of node-a reach each other over blue, through the bridge Multus' delegate made.
	assertTCP(ctx, t, ns1, addrs["pod-1/net1"].Addr(), ns3, addrs["pod-3/net1"].Addr())

	// The reservations name the pod, its interface and its node.
	for _, c := range []struct {
		pool, container, ifName, podRef, node string
		addr                                  netip.Addr
	}{
		{"10.83.0.0-24", "mt-pod-1", "net1", "mt/pod-1", "node-a", addrs["pod-1/net1"].Addr()},
		{"10.84.0.0-24", "mt-pod-1", "net2", "mt/pod-1", "node-a", addrs["pod-1/net2"].Addr()},
		{"10.83.0.0-24", "mt-pod-2", "net1", "mt/pod-2", "node-b", staticBlue},
		{"10.84.0.0-24", "mt-pod-2", "net2", "mt/pod-2", "node-b", staticGreen},
	} {
		r, ok := reservations(t, env, c.pool)[c.container]
		if !ok || r.Spec.Address != c.addr.String() || r.Spec.IfName != c.ifName || r.Spec.PodRef != c.podRef || r.Spec.Node != c.node {
			t.Errorf("reservation of %s %s in %s = %+v (found %v), want %s on %s for %s", c.container, c.ifName, c.pool, r.Spec, ok, c.addr, c.node, c.podRef)
		}
	}

	t.Run("a requested address that is taken is refused, through Multus", func(t *testing.T) {
		pod4 := mustPod(ctx, t, env, namespace, "pod-4", "node-a", []map[string]any{
			{"name": "green", "ips": []string{staticGreen.String() + "/24"}},
		})
		_, err := nodeA.network.Add(ctx, podRuntime(pod4, "mt-pod-4", mustNetNS(t)))
		var cniErr *types.Error
		if !errors.As(err, &cniErr) {
			t.Fatalf("ADD of pod-4 asking for pod-2's %s: %v, want a CNI error", staticGreen, err)
		}
		// Multus reports every delegate failure as 999 (an internal error) and keeps the message.
		if cniErr.Code != types.ErrInternal || !strings.Contains(cniErr.Msg, staticGreen.String()) || !strings.Contains(cniErr.Msg, "in use") {
			t.Fatalf("ADD of pod-4: code %d %q, want 999 with netpool's message naming %s in use", cniErr.Code, cniErr.Msg, staticGreen)
		}
		if r, ok := reservations(t, env, "10.84.0.0-24")["mt-pod-4"]; ok {
			t.Fatalf("the refused ADD left a reservation: %+v", r.Spec)
		}
	})

	// DEL through Multus releases every attachment of the pod; a second DEL is still a success.
	for i := 0; i < 2; i++ {
		if err := nodeA.network.Del(ctx, rt1); err != nil {
			t.Fatalf("DEL %d of pod-1: %v", i+1, err)
		}
	}
	for _, pool := range []string{"10.83.0.0-24", "10.84.0.0-24"} {
		if r, ok := reservations(t, env, pool)["mt-pod-1"]; ok {
			t.Errorf("after DEL pod-1 still holds %s in %s", r.Spec.Address, pool)
		}
	}
	if _, ok := reservations(t, env, "10.83.0.0-24")["mt-pod-3"]; !ok {
		t.Error("DEL of pod-1 released pod-3's address")
	}
	if err := nodeB.network.Del(ctx, rt2); err != nil {
		t.Fatalf("DEL of pod-2: %v", err)
	}
	if err := nodeA.network.Del(ctx, rt3); err != nil {
		t.Fatalf("DEL of pod-3: %v", err)
	}
	for _, pool := range []string{"10.83.0.0-24", "10.84.0.0-24"} {
		if left := reservations(t, env, pool); len(left) != 0 {
			t.Errorf("after every DEL, %s still holds %d reservations", pool, len(left))
		}
	}
}
