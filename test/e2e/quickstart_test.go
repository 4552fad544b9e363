package e2e

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/harness"
	"github.com/netpool/netpool/test/harness/kustomize"
	"github.com/netpool/netpool/test/poll"
)

// TestQuickStartKubernetes follows the README's Kubernetes quick start as far as a kube-apiserver
// without kubelets allows, with the README's own manifests and commands:
//
//  1. kubectl apply -k deploy/base: rendered with the kustomize library and server-side applied
//     for real, every object (CRDs, namespace, RBAC, the admission policy, the DaemonSet, the
//     controller's Deployment); nothing is skipped, but no kubelet runs them, so the controller's
//     reconcilers run in this process, as the Deployment's single leader would;
//  2. the DaemonSet on node-1, played by the test: the pod the DaemonSet controller would create
//     from its template, and the built netpool-agent run with that container's command line, the
//     node's /run/netpool, and a token bound to that pod (the ServiceAccount of the applied RBAC,
//     checked by the applied node-isolation policy);
//  3. the README's NAD and pod, read from README.md, and the pod's attachment made by the real
//     Multus thin plugin as kubelet's runtime would, with macvlan on the node's eth1;
//  4. every netpoolctl command of the section, run as the built binary with a netpool-viewer
//     identity, printing what the README says it prints (ages aside).
func TestQuickStartKubernetes(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	// Built before the test's clock starts: on a loaded machine the builds alone can take minutes.
	harness.MustCommandBinary(t, "netpool-agent")
	harness.MustCommandBinary(t, "netpoolctl")
	harness.MustMultusBinary(t)
	ctx := testContext(t)
	env := envtest.Start(t)
	env.InstallNADCRD(t) // Multus' CRD: Multus is the cluster's, not netpool's
	qs := readQuickStart(t)

	// 1. kubectl apply -k deploy/base
	base := kustomize.Render(t, "base")
	serverSideApply(ctx, t, env, base)
	mustController(t, env)

	// 2. The agent DaemonSet's pod on node-1.
	const node = "node-1"
	if err := env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil {
		t.Fatal(err)
	}
	agentPod := daemonSetPod(ctx, t, env, findObject(t, base, "DaemonSet", "netpool-agent"), node)
	runDir, err := os.MkdirTemp("", "npqs") // socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(runDir) })
	startAgentBinary(t, containerCommand(t, agentPod, "agent"), podTokenKubeconfig(ctx, t, env, agentPod), node, runDir)
	multus := mustMultusNode(t, env, node, filepath.Join(runDir, "agent.sock"), "10.86.1.0/24")
	// The README's NAD puts macvlan on eth1: here a veth end (the kernel has no dummy links).
	if err := harness.AddVethPair(multus.host, "eth1", "eth1-peer"); err != nil {
		t.Fatal(err)
	}

	// 3. The README's NAD, in its namespace, and the README's pod, scheduled to node-1.
	nad := qs.object(t, "NetworkAttachmentDefinition")
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nad.GetNamespace()}}); err != nil {
		t.Fatal(err)
	}
	readmePod := qs.object(t, "Pod")
	if err := unstructured.SetNestedField(readmePod.Object, node, "spec", "nodeName"); err != nil { // the scheduler's part
		t.Fatal(err)
	}
	serverSideApply(ctx, t, env, []*unstructured.Unstructured{nad, readmePod})
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(readmePod), pod); err != nil {
		t.Fatal(err)
	}
	netns := mustNetNS(t)
	rt := podRuntime(pod, "quickstart-"+pod.Name, netns)
	mustAdd(ctx, t, multus.network, rt)
	st, ok := podNetworkStatus(ctx, t, env, pod)["net1"]
	if !ok || len(st.IPs) != 1 {
		t.Fatalf("pod %s/%s: network-status of net1 = %+v, want one address", pod.Namespace, pod.Name, st)
	}
	addr, err := netip.ParseAddr(st.IPs[0])
	if err != nil {
		t.Fatal(err)
	}
	assertKernelAddrs(t, netns, "net1", []netip.Prefix{netip.PrefixFrom(addr, 22)})

	// The pool's status is the controller's, written at most a second after a change: wait for the
	// count and the Ready condition an operator would see before comparing what netpoolctl prints.
	waitPoolCounted(ctx, t, env, qs.shownPool(t), 1)

	// 4. netpoolctl as a viewer (deploy/base/viewer-role.yaml, bound as the README binds it).
	bindViewers(ctx, t, env, "netpool-viewers")
	kubeconfig := env.UserKubeconfig(t, "quickstart-viewer", []string{"netpool-viewers"})
	waitViewer(ctx, t, kubeconfig)
	var shown bool
	for _, c := range qs.commands {
		if slices.Contains(c.Args, "--db") {
			continue // the embedded store's, which make demo shows
		}
		got := runNetpoolctl(ctx, t, append([]string{"--kubeconfig", kubeconfig}, c.Args...)...)
		t.Logf("$ netpoolctl %s\n%s", strings.Join(c.Args, " "), got)
		if harness.NormaliseAges(got) != harness.NormaliseAges(c.Output) {
			t.Errorf("netpoolctl %s prints\n%s\nthe README says\n%s", strings.Join(c.Args, " "), got, c.Output)
		}
		if len(c.Args) > 0 && c.Args[0] == "show" {
			shown = true
			for _, want := range []string{addr.String(), pod.Namespace + "/" + pod.Name, "net1", node} {
				if !strings.Contains(got, want) {
					t.Errorf("netpoolctl %s does not show %s:\n%s", strings.Join(c.Args, " "), want, got)
				}
			}
		}
	}
	if !shown {
		t.Fatal("the README's quick start runs no netpoolctl show")
	}

	mustDel(ctx, t, multus.network, rt)
	if left := runNetpoolctl(ctx, t, "--kubeconfig", kubeconfig, "whois", addr.String()); strings.Contains(left, pod.Name) {
		t.Errorf("after DEL netpoolctl whois %s still names the pod:\n%s", addr, left)
	}
}

// bindViewers binds the netpool-viewer ClusterRole to group, as
// kubectl create clusterrolebinding netpool-viewers --clusterrole=netpool-viewer --group=<group>.
func bindViewers(ctx context.Context, t *testing.T, env *envtest.Env, group string) {
	t.Helper()
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "netpool-viewers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "netpool-viewer"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}},
	}
	if err := env.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
}

// waitViewer waits until the viewer's binding is in force: RBAC reaches the authorizer's cache a
// moment after the create.
func waitViewer(ctx context.Context, t *testing.T, kubeconfig string) {
	t.Helper()
	poll.Eventually(t, 30*time.Second, "netpoolctl pools as a viewer", func() error {
		_, err := netpoolctlOutput(ctx, "--kubeconfig", kubeconfig, "pools")
		return err
	})
}
