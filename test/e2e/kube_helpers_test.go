package e2e

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/cni-plugin/agent"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/agenttest"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/harness"
)

// mustAgent runs a netpool node agent for node (in this process, as the netpool-agent binary
// would) against env, serving a socket in a fresh short directory, and returns the socket once the
// agent serves it. The test's end stops the agent and checks that it stopped cleanly.
func mustAgent(t *testing.T, env *envtest.Env, node string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "npk") // socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket := filepath.Join(dir, "agent.sock")
	mustAgentAt(t, env, node, socket)
	return socket
}

// mustAgentAt is mustAgent with the socket at a path of the test's choosing.
func mustAgentAt(t *testing.T, env *envtest.Env, node, socket string) {
	t.Helper()
	agenttest.Run(t, env.Config, agent.Options{NodeName: node, Socket: socket})
}

// kubeConflist returns a conflist with one bridge plugin (bridge is the Linux bridge, which holds
// the gateway) delegating to netpool in Kubernetes mode through the agent at socket, with the
// "ips" capability, so that a runtime's requested addresses reach netpool as runtimeConfig.ips.
func kubeConflist(t *testing.T, network, bridge, socket string, fields map[string]any) []byte {
	t.Helper()
	ipam := map[string]any{
		"type":       "netpool",
		"datastore":  "kubernetes",
		"kubernetes": map[string]any{"agent_socket": socket},
	}
	for k, v := range fields {
		ipam[k] = v
	}
	b, err := json.Marshal(map[string]any{
		"cniVersion": harness.CNIVersion,
		"name":       network,
		"plugins": []any{map[string]any{
			"type":         "bridge",
			"bridge":       bridge,
			"isGateway":    true,
			"capabilities": map[string]any{"ips": true},
			"ipam":         ipam,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// podAttachment is harness.Attachment for the pod namespace/name, with the CNI_ARGS Multus passes
// (IgnoreUnknown, so that bridge accepts the K8S_POD_* keys).
func podAttachment(containerID string, netns ns.NetNS, ifName, namespace, name string) *libcni.RuntimeConf {
	rt := harness.Attachment(containerID, netns, ifName)
	rt.Args = [][2]string{{"IgnoreUnknown", "true"}, {"K8S_POD_NAMESPACE", namespace}, {"K8S_POD_NAME", name}}
	return rt
}

// reservations returns the reservations of pool on the API server, by container ID.
func reservations(t *testing.T, env *envtest.Env, pool string) map[string]ipamv1.OverlappingRangeIPReservation {
	t.Helper()
	var list ipamv1.OverlappingRangeIPReservationList
	if err := env.Client.List(context.Background(), &list, client.MatchingLabels{ipamv1.PoolLabel: ipamv1.LabelValue(pool)}); err != nil {
		t.Fatal(err)
	}
	out := map[string]ipamv1.OverlappingRangeIPReservation{}
	for _, r := range list.Items {
		if prev, dup := out[r.Spec.ContainerID]; dup {
			t.Fatalf("container %s holds both %s and %s", r.Spec.ContainerID, prev.Spec.Address, r.Spec.Address)
		}
		out[r.Spec.ContainerID] = r
	}
	return out
}

// nodeSlices returns the blocks of pool that each node holds on the API server.
func nodeSlices(t *testing.T, env *envtest.Env, pool string) map[string][]netip.Prefix {
	t.Helper()
	var list ipamv1.IPPoolSliceList
	if err := env.Client.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string][]netip.Prefix{}
	for _, s := range list.Items {
		if s.Spec.Pool != pool {
			continue
		}
		p, err := netip.ParsePrefix(s.Spec.Range)
		if err != nil {
			t.Fatalf("slice %s: %v", s.Name, err)
		}
		out[s.Spec.Node] = append(out[s.Spec.Node], p)
	}
	return out
}

// sliceOf returns the block that holds a, and the node that holds the block.
func sliceOf(slices map[string][]netip.Prefix, a netip.Addr) (netip.Prefix, string) {
	for node, ps := range slices {
		for _, p := range ps {
			if p.Contains(a) {
				return p, node
			}
		}
	}
	return netip.Prefix{}, ""
}
