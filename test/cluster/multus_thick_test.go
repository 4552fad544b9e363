package cluster_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpool/netpool/test/cluster"
	"github.com/netpool/netpool/test/poll"
)

// TestMultusThick: what TestMultusThin shows, with Multus thick. multus-daemon runs as a DaemonSet
// that the scheduler places and kubelet and containerd start on each node (privileged, with the
// node's /, /run/netns and /var/lib/kubelet mounted HostToContainer); it writes the node's
// 00-multus.conf, the runtime calls multus-shim, and the shim hands each ADD and DEL to the
// daemon, which runs macvlan and netpool chrooted into the node's root. The daemon's log on each
// node shows it served that node's pod, and the DEL that released a's address. Afterwards the
// nodes run thin again, their CNI files as they were, the DaemonSet and its socket gone.
func TestMultusThick(t *testing.T) {
	c := need(t)
	before := multusFiles(t, c)
	ns := testNamespace(t, c, nil)
	// Registered after the namespace's clean-up, so it runs first: the pods started under thick
	// are deleted while the daemon can still run their DEL.
	t.Cleanup(func() { backToThin(t, c, ns, before) })
	if err := c.UseMultusThick(context.Background()); err != nil {
		t.Fatalf("switching to Multus thick: %v", err)
	}
	podsOnStorage(t, c, ns, "storage-thick", "192.168.56.0/22", "192.168.56.1")
	for _, w := range []struct{ node, verb, pod string }{
		{c.Nodes[0].Name, "ADD", "a"}, {c.Nodes[1].Name, "ADD", "b"}, {c.Nodes[0].Name, "DEL", "a"},
	} {
		if line := daemonServed(t, c, w.node, w.verb, ns, w.pod); line == "" {
			t.Errorf("the multus-daemon on %s did not log a %s for %s/%s without error; its log:\n%s", w.node, w.verb, ns, w.pod, daemonLog(t, c, w.node))
		}
	}
}

// backToThin deletes ns's pods, waiting until they are gone, switches the nodes back to Multus
// thin and checks that every node's CNI files are what they were before (multusFiles), and that
// the DaemonSet is gone.
func backToThin(t *testing.T, c *cluster.Cluster, ns string, before map[string]string) {
	ctx := context.Background()
	if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Errorf("deleting the pods of %s: %v", ns, err)
	}
	poll.Eventually(t, 2*time.Minute, "the pods of "+ns+" gone", func() error {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d left, %s", len(pods.Items), pods.Items[0].Name)
		}
		return nil
	})
	if err := c.UseMultusThin(ctx); err != nil {
		t.Errorf("switching back to Multus thin: %v", err)
	}
	after := multusFiles(t, c)
	var diff []string
	for k, v := range before {
		if after[k] != v {
			diff = append(diff, fmt.Sprintf("%s: was %s, now %q", k, v, after[k]))
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			diff = append(diff, fmt.Sprintf("%s: new, %s", k, v))
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		t.Errorf("after switching back to thin the nodes differ from before thick:\n  %s", strings.Join(diff, "\n  "))
	}
	if _, err := c.Client.AppsV1().DaemonSets(cluster.MultusThickNamespace).Get(ctx, cluster.MultusThickDaemonSet, metav1.GetOptions{}); err == nil {
		t.Errorf("the %s DaemonSet is still there", cluster.MultusThickDaemonSet)
	}
}

// multusFiles is what on the nodes Multus' way of running decides: every file under each node's
// /etc/cni/net.d and /opt/cni/bin (its mode and the hash of its contents) and whether the thick
// daemon's socket directory /run/multus exists; keyed node:path.
func multusFiles(t *testing.T, c *cluster.Cluster) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range c.Nodes {
		for _, dir := range []string{"/etc/cni/net.d", "/opt/cni/bin"} {
			root := n.Path(dir)
			err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				info, err := d.Info()
				if err != nil {
					return err
				}
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				out[n.Name+":"+dir+strings.TrimPrefix(p, root)] = fmt.Sprintf("%s sha256:%x", info.Mode(), sha256.Sum256(data))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Stat(n.Path("/run/multus")); err == nil {
			out[n.Name+":/run/multus"] = "exists"
		}
	}
	return out
}

// daemonLog is the log of the multus-daemon container on node, as kubelet keeps it under the
// node's /var/log/pods.
func daemonLog(t *testing.T, c *cluster.Cluster, node string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(c.Node(node).Path("/var/log/pods"), cluster.MultusThickNamespace+"_"+cluster.MultusThickDaemonSet+"-*", "kube-multus", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no log of the multus-daemon on %s", node)
	}
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// daemonServed returns the line of the multus-daemon's log on node that says it finished verb for
// the pod ns/name without error, or "".
func daemonServed(t *testing.T, c *cluster.Cluster, node, verb, ns, name string) string {
	t.Helper()
	// The daemon logs the CNI_ARGS quoted: each key ends at a ';' or at the closing quote.
	arg := func(line, kv string) bool {
		return strings.Contains(line, kv+";") || strings.Contains(line, kv+`"`)
	}
	for _, line := range strings.Split(daemonLog(t, c, node), "\n") {
		if strings.Contains(line, verb+" finished CNI request") && arg(line, "K8S_POD_NAMESPACE="+ns) &&
			arg(line, "K8S_POD_NAME="+name) && strings.HasSuffix(line, "err: <nil>") {
			return line
		}
	}
	return ""
}
