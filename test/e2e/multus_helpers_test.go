package e2e

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/harness"
)

// nodeRunDir is where a node's agent socket lives on a real node (ipam.DefaultAgentSocket's
// directory). Each simulated node's Multus runs in a mount namespace in which this directory is
// that node's agent directory, so one NAD, which names no socket, reaches the agent of whichever
// node the pod is on, as it does in a cluster.
const nodeRunDir = "/run/netpool"

var nodeRunDirOnce sync.Once

// ensureNodeRunDir makes sure nodeRunDir exists to be mounted over. Only the private mount
// namespaces of the simulated nodes ever mount anything on it.
func ensureNodeRunDir(t *testing.T) {
	t.Helper()
	var err error
	nodeRunDirOnce.Do(func() { err = os.MkdirAll(nodeRunDir, 0o700) })
	if err != nil {
		t.Fatalf("creating %s: %v", nodeRunDir, err)
	}
}

// multusNode is one simulated node that runs the real Multus thin plugin as kubelet's runtime
// would: Multus reads the pod and its NADs from the API server and delegates each attachment to
// the plugins in the harness's bin dir, with netpool reaching the node's own agent.
type multusNode struct {
	name    string
	host    ns.NetNS
	network *harness.Network
	logFile string
}

// mustMultusNode prepares node: a host namespace, a wrapper that runs Multus in the node's mount
// view (its agent socket's directory at /run/netpool), and a Multus configuration whose cluster
// network (eth0) is a bridge with host-local on clusterSubnet.
func mustMultusNode(t *testing.T, env *envtest.Env, node, socket, clusterSubnet string) *multusNode {
	t.Helper()
	ensureNodeRunDir(t)
	multus := harness.MustMultusBinary(t)
	bin := harness.MustBinDir(t)
	dir := t.TempDir()
	wrapperDir := filepath.Join(dir, "bin")
	if err := os.Mkdir(wrapperDir, 0o755); err != nil {
		t.Fatal(err)
	}
	err := harness.WriteMountViewWrapper(filepath.Join(wrapperDir, "multus"), multus,
		[]harness.Bind{{Source: filepath.Dir(socket), Target: nodeRunDir}})
	if err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(dir, "multus.log")
	conf, err := json.Marshal(map[string]any{
		"cniVersion": harness.CNIVersion,
		"name":       "multus-cni-network",
		"plugins": []any{map[string]any{
			"type":       "multus",
			"kubeconfig": env.Kubeconfig,
			"cniDir":     filepath.Join(dir, "multus-cache"),
			"binDir":     bin,
			"confDir":    filepath.Join(dir, "net.d"),
			"logFile":    logFile,
			"logLevel":   "verbose",
			"delegates": []any{map[string]any{
				"cniVersion": harness.CNIVersion,
				"name":       "cluster",
				"plugins": []any{map[string]any{
					"type": "bridge", "bridge": "np-mcl", "isGateway": true,
					"ipam": map[string]any{"type": "host-local", "subnet": clusterSubnet,
						"dataDir": filepath.Join(dir, "host-local")},
				}},
			}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	host := mustNetNS(t)
	// Multus runs in the node's host namespace, as on a node, and reaches the API server there.
	apiserver, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := harness.ForwardTCP(host, apiserver.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fwd.Close(); err != nil {
			t.Errorf("forwarder of %s: %v", node, err)
		}
	})
	n, err := harness.NewNetwork(wrapperDir, filepath.Join(dir, "libcni-cache"), host, conf)
	if err != nil {
		t.Fatal(err)
	}
	mn := &multusNode{name: node, host: host, network: n, logFile: logFile}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(logFile); err == nil {
				t.Logf("multus log of %s:\n%s", node, b)
			}
		}
	})
	return mn
}

// podRuntime is the RuntimeConf kubelet gives the CNI plugin for pod's sandbox in netns.
func podRuntime(pod *corev1.Pod, containerID string, netns ns.NetNS) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: containerID, NetNS: netns.Path(), IfName: "eth0",
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", pod.Namespace},
			{"K8S_POD_NAME", pod.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", containerID},
			{"K8S_POD_UID", string(pod.UID)},
		},
	}
}

// mustNAD creates a NetworkAttachmentDefinition whose config is conf.
func mustNAD(ctx context.Context, t *testing.T, env *envtest.Env, namespace, name string, conf any) {
	t.Helper()
	b, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	nad := &unstructured.Unstructured{}
	nad.SetAPIVersion("k8s.cni.cncf.io/v1")
	nad.SetKind("NetworkAttachmentDefinition")
	nad.SetNamespace(namespace)
	nad.SetName(name)
	if err := unstructured.SetNestedField(nad.Object, string(b), "spec", "config"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, nad); err != nil {
		t.Fatalf("creating NAD %s/%s: %v", namespace, name, err)
	}
}

// mustPod creates a pod on node whose k8s.v1.cni.cncf.io/networks annotation is networks.
func mustPod(ctx context.Context, t *testing.T, env *envtest.Env, namespace, name, node string, networks []map[string]any) *corev1.Pod {
	t.Helper()
	b, err := json.Marshal(networks)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": string(b)}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatalf("creating pod %s/%s: %v", namespace, name, err)
	}
	return pod
}

// networkStatus is one entry of the k8s.v1.cni.cncf.io/network-status annotation Multus writes.
type networkStatus struct {
	Name      string   `json:"name"`
	Interface string   `json:"interface"`
	IPs       []string `json:"ips"`
}

// podNetworkStatus reads the network-status annotation Multus wrote on the pod, by interface.
func podNetworkStatus(ctx context.Context, t *testing.T, env *envtest.Env, pod *corev1.Pod) map[string]networkStatus {
	t.Helper()
	got := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	raw, ok := got.Annotations["k8s.v1.cni.cncf.io/network-status"]
	if !ok {
		t.Fatalf("pod %s/%s has no network-status annotation: Multus did not report the attachments", pod.Namespace, pod.Name)
	}
	var list []networkStatus
	if err := json.Unmarshal([]byte(raw), &list); err != nil {
		t.Fatalf("pod %s/%s network-status %q: %v", pod.Namespace, pod.Name, raw, err)
	}
	out := map[string]networkStatus{}
	for _, s := range list {
		out[s.Interface] = s
	}
	return out
}
