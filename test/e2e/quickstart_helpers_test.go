package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/harness"
	"github.com/netpool/netpool/test/poll"
)

// quickStart is the README's "Kubernetes quick start" section: the manifests and the netpoolctl
// commands, with their printed output, that an operator copies from it.
type quickStart struct {
	objects  []*unstructured.Unstructured // every object of its yaml blocks
	commands []harness.ConsoleCommand     // every "$ netpoolctl ..." of its console blocks
}

// readQuickStart extracts the quick start from README.md, so that a README edit that stops
// working fails the test.
func readQuickStart(t *testing.T) quickStart {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section, err := harness.MarkdownSection(string(data), "Kubernetes quick start")
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	var qs quickStart
	for _, b := range harness.FencedBlocks(section) {
		switch b.Lang {
		case "yaml":
			dec := k8syaml.NewYAMLOrJSONDecoder(strings.NewReader(b.Body), 4096)
			for {
				var m map[string]any
				if err := dec.Decode(&m); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					t.Fatalf("README quick start: a yaml block does not parse: %v\n%s", err, b.Body)
				}
				if m != nil {
					qs.objects = append(qs.objects, &unstructured.Unstructured{Object: m})
				}
			}
		case "console":
			qs.commands = append(qs.commands, harness.ConsoleCommands(b.Body, "netpoolctl")...)
		}
	}
	return qs
}

// object returns the one object of kind in the quick start.
func (qs quickStart) object(t *testing.T, kind string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range qs.objects {
		if o.GetKind() == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("README quick start holds %d %s manifests, want 1", len(found), kind)
	}
	return found[0].DeepCopy()
}

// serverSideApply applies each object for real, as kubectl apply --server-side would, namespaces
// and CRDs first (the others may live in or be of them).
func serverSideApply(ctx context.Context, t *testing.T, env *envtest.Env, objs []*unstructured.Unstructured) {
	t.Helper()
	first := func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "Namespace" || o.GetKind() == "CustomResourceDefinition"
	}
	for _, pass := range []bool{true, false} {
		for _, o := range objs {
			if first(o) != pass {
				continue
			}
			err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
				client.FieldOwner("netpool-quickstart"), client.ForceOwnership)
			if err != nil {
				t.Fatalf("apply %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
		}
	}
}

// findObject returns the rendered object of kind and name.
func findObject(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o.DeepCopy()
		}
	}
	t.Fatalf("deploy/base renders no %s %s", kind, name)
	return nil
}

// daemonSetPod creates the pod the DaemonSet controller would create on node from ds's template
// (no controller runs on envtest), and returns it as stored.
func daemonSetPod(ctx context.Context, t *testing.T, env *envtest.Env, ds *unstructured.Unstructured, node string) *corev1.Pod {
	t.Helper()
	tmpl, _, err := unstructured.NestedMap(ds.Object, "spec", "template")
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, pod); err != nil {
		t.Fatalf("DaemonSet %s template: %v", ds.GetName(), err)
	}
	pod.Name, pod.Namespace = ds.GetName()+"-"+node, ds.GetNamespace()
	pod.Spec.NodeName = node
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatalf("creating the DaemonSet's pod on %s: %v", node, err)
	}
	return pod
}

// podTokenKubeconfig writes a kubeconfig that authenticates with a token of pod's ServiceAccount
// bound to pod, as the kubelet projects one into it: the API server puts the pod's node into the
// token's user info, which node isolation (agent-admission.yaml) requires.
func podTokenKubeconfig(ctx context.Context, t *testing.T, env *envtest.Env, pod *corev1.Pod) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: pod.Spec.ServiceAccountName, Namespace: pod.Namespace}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if err := env.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatalf("requesting a token of %s/%s: %v", sa.Namespace, sa.Name, err)
	}
	if tr.Status.Token == "" {
		t.Fatal("the token request returned no token")
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos["agent"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["agent"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "agent"}
	cfg.CurrentContext = "agent"
	path := filepath.Join(t.TempDir(), "agent.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// containerCommand returns the command line of the container name of pod.
func containerCommand(t *testing.T, pod *corev1.Pod, name string) []string {
	t.Helper()
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return append(append([]string{}, c.Command...), c.Args...)
		}
	}
	t.Fatalf("pod %s has no container %s", pod.Name, name)
	return nil
}

// startAgentBinary runs the built netpool-agent with the argv of the DaemonSet's agent container
// (its /netpool-agent replaced by the built binary), in a mount namespace in which runDir is the
// node's /run/netpool (the DaemonSet's hostPath), and returns once the agent serves its socket.
// The test's end stops it with SIGTERM and checks that it exited cleanly.
func startAgentBinary(t *testing.T, argv []string, kubeconfig, node, runDir string) {
	t.Helper()
	ensureNodeRunDir(t)
	bin := harness.MustCommandBinary(t, "netpool-agent")
	if len(argv) == 0 || filepath.Base(argv[0]) != "netpool-agent" {
		t.Fatalf("the DaemonSet's agent container runs %v, want netpool-agent", argv)
	}
	args := []string{bin, "--kubeconfig", kubeconfig}
	for _, a := range argv[1:] {
		// The DaemonSet's metrics port is the pod's own; on this shared machine any free one does.
		if strings.HasPrefix(a, "--metrics-bind-address=") {
			a = "--metrics-bind-address=127.0.0.1:0"
		}
		args = append(args, a)
	}
	cmd := harness.MountViewCommand([]harness.Bind{{Source: runDir, Target: nodeRunDir}}, args...)
	cmd.Env = append(os.Environ(), "NODENAME="+node) // the DaemonSet's fieldRef spec.nodeName
	var stderr harness.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("netpool-agent of %s: %v\n%s", node, err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("netpool-agent of %s did not stop on SIGTERM", node)
		}
	})
	socket := filepath.Join(runDir, "agent.sock")
	poll.Eventually(t, 30*time.Second, "netpool-agent of "+node+" serves its socket", func() error {
		c, err := net.Dial("unix", socket)
		if err == nil {
			return c.Close()
		}
		select {
		case exit := <-exited:
			exited <- exit
			t.Fatalf("netpool-agent of %s exited: %v\n%s", node, exit, stderr.String())
		default:
		}
		return fmt.Errorf("%w\n%s", err, stderr.String())
	})
}

// runNetpoolctl runs the built netpoolctl with args and returns its stdout; a failure stops the
// test with its stderr.
func runNetpoolctl(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	harness.MustCommandBinary(t, "netpoolctl")
	out, err := netpoolctlOutput(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// netpoolctlOutput runs the built netpoolctl with args and returns its stdout, or an error with
// its stderr.
func netpoolctlOutput(ctx context.Context, args ...string) (string, error) {
	bin, err := harness.CommandBinary("netpoolctl")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("netpoolctl %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// shownPool is the pool that the quick start's `netpoolctl show POOL` names.
func (q quickStart) shownPool(t *testing.T) string {
	t.Helper()
	for _, c := range q.commands {
		if len(c.Args) == 2 && c.Args[0] == "show" {
			return c.Args[1]
		}
	}
	t.Fatal("the README's quick start runs no `netpoolctl show POOL`")
	return ""
}

// waitPoolCounted waits until the controller has written pool's status: allocated as want and a
// Ready condition, so that netpoolctl prints the settled state rather than the moment before.
func waitPoolCounted(ctx context.Context, t *testing.T, env *envtest.Env, pool string, want int64) {
	t.Helper()
	poll.Eventually(t, 60*time.Second, "the controller counts IPPool "+pool, func() error {
		var p ipamv1.IPPool
		if err := env.Client.Get(ctx, client.ObjectKey{Name: pool}, &p); err != nil {
			return err
		}
		if p.Status.Allocated == nil || *p.Status.Allocated != want {
			return fmt.Errorf("status.allocated %v, want %d", p.Status.Allocated, want)
		}
		if meta.FindStatusCondition(p.Status.Conditions, ipamv1.IPPoolReadyCondition) == nil {
			return fmt.Errorf("no %s condition yet", ipamv1.IPPoolReadyCondition)
		}
		return nil
	})
}
