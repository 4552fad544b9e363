package cli

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/cni-plugin/agent"
	"github.com/netpool/netpool/internal/scheme"
	"github.com/netpool/netpool/test/agenttest"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/harness"
)

// whereaboutsEnv is the shared API server with whereabouts' CRDs and the NAD CRD installed, the
// real whereabouts plugin, and a client that knows NADs.
type whereaboutsEnv struct {
	env    *envtest.Env
	plugin string
	c      client.Client
	// flatDir holds the node's flat file (whereabouts.conf), which whereabouts requires.
	flatDir string
}

func mustWhereabouts(t *testing.T) *whereaboutsEnv {
	t.Helper()
	env := envtest.Shared(t)
	plugin, err := harness.WhereaboutsBinary()
	if err != nil {
		t.Fatalf("building whereabouts: %v", err)
	}
	crds, err := harness.WhereaboutsCRDDir()
	if err != nil {
		t.Fatal(err)
	}
	env.InstallNADCRD(t)
	env.InstallCRDFiles(t, filepath.Join(crds, "whereabouts.cni.cncf.io_ippools.yaml"),
		filepath.Join(crds, "whereabouts.cni.cncf.io_overlappingrangeipreservations.yaml"))
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	w := &whereaboutsEnv{env: env, plugin: plugin, c: c, flatDir: t.TempDir()}
	flat := `{"datastore": "kubernetes", "kubernetes": {"kubeconfig": "` + env.Kubeconfig + `"}}`
	if err := os.WriteFile(filepath.Join(w.flatDir, "whereabouts.conf"), []byte(flat), 0o600); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *whereaboutsEnv) mustCreate(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := w.c.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func (w *whereaboutsEnv) namespace(t *testing.T, name string) {
	t.Helper()
	w.mustCreate(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// pod creates a pod bound to node, as the scheduler leaves it; nothing runs it.
func (w *whereaboutsEnv) pod(t *testing.T, ns, name, node string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "example.invalid/app"}}}}
	w.mustCreate(t, p)
	return p
}

func (w *whereaboutsEnv) nad(t *testing.T, ns, name, config string) {
	t.Helper()
	w.mustCreate(t, &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: config}})
}

// whereaboutsConfig is a macvlan NAD config whose IPAM is whereabouts on the test's API server.
func (w *whereaboutsEnv) whereaboutsConfig(t *testing.T, name, networkName, subnet string) string {
	t.Helper()
	conf, err := json.Marshal(map[string]any{
		"cniVersion": "1.0.0", "name": name, "type": "macvlan", "master": "eth0",
		"ipam": map[string]any{
			"type": "whereabouts", "range": subnet, "network_name": networkName,
			"kubernetes":         map[string]any{"kubeconfig": w.env.Kubeconfig},
			"configuration_path": filepath.Join(w.flatDir, "whereabouts.conf"),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(conf)
}

// podArgs is CNI_ARGS as Multus passes them for pod.
func podArgs(p *corev1.Pod) string {
	return "IgnoreUnknown=1;K8S_POD_NAMESPACE=" + p.Namespace + ";K8S_POD_NAME=" + p.Name + ";K8S_POD_UID=" + string(p.UID)
}

// cniAdd runs plugin's ADD for (containerID, net1) of pod as a runtime would: the CNI
// environment and the network config on stdin. Neither IPAM plugin enters the netns, so none is
// made.
func cniAdd(t *testing.T, plugin string, config []byte, containerID string, p *corev1.Pod) (netip.Addr, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := harness.Exec(ctx, plugin, harness.Invocation{Command: "ADD", ContainerID: containerID, IfName: "net1",
		Args: podArgs(p), Config: config})
	if err != nil {
		return netip.Addr{}, err
	}
	addrs, err := out.Addrs()
	if err != nil || len(addrs) != 1 {
		t.Fatalf("ADD %s: result %s: %v", containerID, out.Stdout, err)
	}
	return addrs[0], nil
}

func cniDel(t *testing.T, plugin string, config []byte, containerID string, p *corev1.Pod) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := harness.Exec(ctx, plugin, harness.Invocation{Command: "DEL", ContainerID: containerID, IfName: "net1",
		Args: podArgs(p), Config: config}); err != nil {
		t.Fatalf("DEL %s: %v", containerID, err)
	}
}

// startAgent runs a netpool node agent for node in this process, as netpool-agent would, and
// returns its socket.
func (w *whereaboutsEnv) startAgent(t *testing.T, node string) string {
	t.Helper()
	env := w.env
	dir, err := os.MkdirTemp("", "npmig") // socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket := filepath.Join(dir, "agent.sock")
	// The flat file lives in the test's directory, not under /etc/cni/net.d, where the agent reads it.
	agenttest.Run(t, env.Config, agent.Options{NodeName: node, Socket: socket, ConfigDirs: []string{w.flatDir}})
	return socket
}

// onNode is a netpool NAD config as the plugin on node sees it: the section points at that node's
// agent (a real node finds it at the default /run/netpool/agent.sock).
func onNode(t *testing.T, config, socket string) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(config), &doc); err != nil {
		t.Fatal(err)
	}
	section := doc["ipam"].(map[string]any)
	section["kubernetes"].(map[string]any)["agent_socket"] = socket
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fixUIDs replaces the pods' UIDs, which the API server picks, by their pods' names padded to the
// same length (so tables stay aligned), so golden files stay stable.
func fixUIDs(out string, pods ...*corev1.Pod) string {
	for _, p := range pods {
		uid := string(p.UID)
		fixed := "uid-of-" + p.Name
		fixed += strings.Repeat("x", max(0, len(uid)-len(fixed)))
		out = strings.ReplaceAll(out, uid, fixed)
	}
	return out
}

func notFound(t *testing.T, err error, what string) {
	t.Helper()
	if !apierrors.IsNotFound(err) {
		t.Fatalf("%s: %v, want NotFound", what, err)
	}
}
