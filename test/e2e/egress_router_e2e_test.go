package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	networkv1 "github.com/netpool/netpool/crds/network/v1"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/poll"
)

// TestEgressRouterEndToEnd runs the whole EgressRouter path: the reconciler, on a real API server,
// turns OpenShift's documented redirect example (with the test topology's addresses and the node's
// m0 as master) into NAD X, Pod X and Service X; the test then does what the kubelet and Multus do
// for Pod X, attaching it through libcni with the NAD the reconciler wrote and reporting its status
// and network-status; a client's connections to the pod's cluster address then reach the rules'
// destinations from the router's address, and the router turns Available.
func TestEgressRouterEndToEnd(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ctx := testContext(t)
	env := envtest.Start(t)
	env.InstallNADCRD(t)
	c := mustController(t, env)

	a := egressV4
	topo := newEgressTopology(t)
	serveTCP(t, topo.dest, netip.AddrPortFrom(a.dest, 80), "dest")
	serveUDP(t, topo.dest, netip.AddrPortFrom(a.dest, 53), "dest-udp")
	serveTCP(t, topo.gw, netip.AddrPortFrom(a.far, 80), "far")

	const namespace, name = "egress-e2e", "egress-router-redirect"
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))
	router := &networkv1.EgressRouter{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: networkv1.EgressRouterSpec{
			Mode:             networkv1.EgressRouterModeRedirect,
			NetworkInterface: networkv1.EgressRouterInterface{Macvlan: networkv1.MacvlanConfig{Mode: networkv1.MacvlanModeBridge, Master: "m0"}},
			Addresses:        []networkv1.EgressRouterAddress{{IP: a.router.String(), Gateway: a.gateway.String()}},
			Redirect: &networkv1.RedirectConfig{RedirectRules: []networkv1.L4RedirectRule{
				{DestinationIP: a.dest.String(), Port: 5353, Protocol: networkv1.ProtocolTypeUDP, TargetPort: 53},
				{DestinationIP: a.dest.String(), Port: 8080, Protocol: networkv1.ProtocolTypeTCP, TargetPort: 80},
				{DestinationIP: a.far.String(), Port: 8081, Protocol: networkv1.ProtocolTypeTCP, TargetPort: 80},
			}},
		},
	}
	must(t, c.Create(ctx, router))
	key := client.ObjectKeyFromObject(router)

	// The reconciler's children.
	nad := &nadv1.NetworkAttachmentDefinition{}
	pod := &corev1.Pod{}
	svc := &corev1.Service{}
	poll.Eventually(t, 30*time.Second, "NAD X", func() error { return c.Get(ctx, key, nad) })
	poll.Eventually(t, 30*time.Second, "Pod X", func() error { return c.Get(ctx, key, pod) })
	poll.Eventually(t, 30*time.Second, "Service X", func() error { return c.Get(ctx, key, svc) })
	for _, rule := range router.Spec.Redirect.RedirectRules {
		if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
			return p.Port == rule.Port && string(p.Protocol) == string(rule.Protocol) && p.TargetPort.IntVal == rule.Port
		}) {
			t.Errorf("Service X ports %+v lack %s %d to the pod's %d", svc.Spec.Ports, rule.Protocol, rule.Port, rule.Port)
		}
	}
	assertCondition(ctx, t, c, key, networkv1.EgressRouterAvailable, metav1.ConditionFalse, networkv1.ReasonPodNotReady)
	// OpenShift's procedure finds the router's pod by app=egress-router-cni, and its Service selects
	// it so: that selector finds Pod X.
	var openShiftSelected corev1.PodList
	must(t, c.List(ctx, &openShiftSelected, client.InNamespace(namespace), client.MatchingLabels{"app": "egress-router-cni"}))
	if len(openShiftSelected.Items) != 1 || openShiftSelected.Items[0].Name != name {
		t.Errorf("pods with app=egress-router-cni: %d, want Pod X alone", len(openShiftSelected.Items))
	}

	// Multus: the pod's networks annotation names the NAD; its config is the one plugin it runs,
	// in the node's namespace (where the master is), for the pod's sandbox.
	var selections []struct{ Name, Namespace, Interface string }
	must(t, json.Unmarshal([]byte(pod.Annotations[nadv1.NetworkAttachmentAnnot]), &selections))
	if len(selections) != 1 || selections[0].Name != nad.Name || selections[0].Namespace != nad.Namespace || selections[0].Interface != "net1" {
		t.Fatalf("Pod X networks annotation %s, want NAD %s/%s on net1", pod.Annotations[nadv1.NetworkAttachmentAnnot], nad.Namespace, nad.Name)
	}
	network := mustNetwork(t, topo.node, nadConflist(t, nad.Spec.Config), nil)
	rt := podAttachment(string(pod.UID), topo.router, "net1", pod.Namespace, pod.Name)
	res := mustAdd(ctx, t, network, rt)
	t.Cleanup(func() {
		if err := network.Del(context.Background(), rt); err != nil {
			t.Errorf("DEL of Pod X's net1: %v", err)
		}
	})
	reportPodStarted(ctx, t, c, pod, nad.Namespace+"/"+nad.Name, res, a.routerCluster.String())

	got := assertCondition(ctx, t, c, key, networkv1.EgressRouterAvailable, metav1.ConditionTrue, networkv1.ReasonRouterReady)
	if len(got.Status.Addresses) != 1 || got.Status.Addresses[0].IP != a.router.String() {
		t.Errorf("status.addresses %+v, want %s", got.Status.Addresses, a.router)
	}
	if cond := meta.FindStatusCondition(got.Status.Conditions, networkv1.EgressRouterDegraded); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Errorf("Degraded is %+v once Available, want False", cond)
	}

	// A client's traffic to the pod's cluster address, as the API server reports it.
	must(t, c.Get(ctx, key, pod))
	podIP, err := netip.ParseAddr(pod.Status.PodIP)
	must(t, err)
	src := a.router.Addr()
	assertReaches(ctx, t, topo.client, "tcp", netip.AddrPortFrom(podIP, 8080), "dest", netip.AddrPortFrom(a.dest, 80), src)
	assertReaches(ctx, t, topo.client, "tcp", netip.AddrPortFrom(podIP, 8081), "far", netip.AddrPortFrom(a.far, 80), src)
	assertReaches(ctx, t, topo.client, "udp", netip.AddrPortFrom(podIP, 5353), "dest-udp", netip.AddrPortFrom(a.dest, 53), src)
}

// nadConflist turns a NAD's single-plugin config into the conflist Multus hands libcni: the
// plugin's own name and cniVersion become the list's.
func nadConflist(t *testing.T, config string) []byte {
	t.Helper()
	var plugin map[string]any
	if err := json.Unmarshal([]byte(config), &plugin); err != nil {
		t.Fatalf("NAD config %s: %v", config, err)
	}
	b, err := json.Marshal(map[string]any{"cniVersion": plugin["cniVersion"], "name": plugin["name"], "plugins": []any{plugin}})
	must(t, err)
	return b
}

// assertCondition waits until the router's condition typ, at its current generation, has status
// and reason, and returns the router; it fails the test with the condition last seen.
func assertCondition(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey, typ string, status metav1.ConditionStatus, reason string) *networkv1.EgressRouter {
	t.Helper()
	r := &networkv1.EgressRouter{}
	poll.Eventually(t, 30*time.Second, fmt.Sprintf("%s %s=%s (%s)", key, typ, status, reason), func() error {
		if err := c.Get(ctx, key, r); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(r.Status.Conditions, typ)
		if cond == nil || cond.ObservedGeneration != r.Generation || cond.Status != status || cond.Reason != reason {
			return fmt.Errorf("generation %d, condition %+v", r.Generation, cond)
		}
		return nil
	})
	return r
}
