package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpool/netpool/test/cluster"
	"github.com/netpool/netpool/test/harness/kustomize"
	"github.com/netpool/netpool/test/poll"
)

// TestInstall checks what installing deploy/ (the README quick start's local overlay, applied by
// TestMain) did on the real nodes: one agent per node, whose install-cni init container put the
// plugin and the flat config into that node's CNI directories; the controller Deployment Available
// with both replicas; and netpoolctl, as a user bound to the read-only role, shows the pools the
// controller derives from the example NADs.
func TestInstall(t *testing.T) {
	c := need(t)
	ctx := context.Background()
	pods, err := c.Client.CoreV1().Pods("netpool-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=netpool-agent"})
	if err != nil {
		t.Fatal(err)
	}
	onNode := map[string]bool{}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			t.Errorf("agent %s on %s is %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
		if len(p.Status.InitContainerStatuses) != 1 || p.Status.InitContainerStatuses[0].State.Terminated == nil ||
			p.Status.InitContainerStatuses[0].State.Terminated.ExitCode != 0 {
			t.Errorf("agent %s: install-cni-plugin did not succeed: %+v", p.Name, p.Status.InitContainerStatuses)
		}
		onNode[p.Spec.NodeName] = true
	}
	for _, n := range c.Nodes {
		if !onNode[n.Name] {
			t.Errorf("no agent on %s (agents: %v)", n.Name, onNode)
		}
		for _, f := range []string{"/opt/cni/bin/netpool", "/opt/cni/bin/netpool-egress-router"} {
			fi, err := os.Stat(n.Path(f))
			if err != nil || fi.Mode()&0o111 == 0 {
				t.Errorf("%s on %s: %v (mode %v)", f, n.Name, err, fi)
			}
		}
		conf, err := os.ReadFile(n.Path("/etc/cni/net.d/netpool.d/netpool.conf"))
		if err != nil {
			t.Errorf("the flat config on %s: %v", n.Name, err)
		} else if !strings.Contains(string(conf), `"kubernetes"`) || !strings.Contains(string(conf), "/run/netpool/agent.sock") {
			t.Errorf("the flat config on %s: %s", n.Name, conf)
		}
		if _, err := os.Stat(n.Path("/run/netpool/agent.sock")); err != nil {
			t.Errorf("the agent's socket on %s: %v", n.Name, err)
		}
	}
	d, err := c.Client.AppsV1().Deployments("netpool-system").Get(ctx, "netpool-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Status.AvailableReplicas != 2 {
		t.Errorf("controller: %d available replicas, want 2", d.Status.AvailableReplicas)
	}

	// netpoolctl as a viewer, bound as the README says.
	_, err = c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "netpool-viewers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "netpool-viewer"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: cluster.ViewerGroup}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), "netpool-viewers", metav1.DeleteOptions{})
	})
	objs, err := kustomize.Build(filepath.Join("..", "..", "deploy", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, objs); err != nil {
		t.Fatal(err)
	}
	viewer, err := c.UserKubeconfig(cluster.ViewerUser)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	poll.Eventually(t, time.Minute, "netpoolctl pools shows the example pools", func() error {
		var err error
		out, err = netpoolctl(t, "--kubeconfig", viewer, "pools")
		if err != nil {
			return err
		}
		for _, want := range []string{"examples-corp", "example-storage-192.168.40.0-24"} {
			if !strings.Contains(out, want) {
				return errorf("no %s in:\n%s", want, out)
			}
		}
		return nil
	})
	if !strings.HasPrefix(lines(out)[0], "NAME ") {
		t.Errorf("netpoolctl pools: no header:\n%s", out)
	}
}
