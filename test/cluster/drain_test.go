package cluster_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/cluster"
	"github.com/netpool/netpool/test/poll"
)

// drainReplicas is the drained Deployment's size: half of it on each node.
const drainReplicas = 4

// TestNodeDrain: `kubectl drain` of the last node (cordon, then the Eviction API for every pod but
// the DaemonSets') moves a Deployment's pods with a netpool secondary network to the first node,
// where they get addresses of their own; the evicted pods' addresses are released by their
// kubelet's DEL (inside the controller's grace, so not by GC); no address is held twice at any
// moment; and after `kubectl uncordon` netpool is whole again.
func TestNodeDrain(t *testing.T) {
	c := need(t)
	ctx := context.Background()
	cl := kubeClient(t, c)
	ns := testNamespace(t, c, nil)
	grace := gcGrace
	const network = "storage-drain"
	applyNAD(t, c, ns, "storage", storageNAD(network, "192.168.44.0/24", "192.168.44.1"))
	drained, kept := c.Nodes[len(c.Nodes)-1].Name, c.Nodes[0].Name
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, drainDeployment(ns), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := webPods(t, c, ns, func(pods []corev1.Pod) error {
		on := map[string]int{}
		for _, p := range pods {
			on[p.Spec.NodeName]++
		}
		if on[drained] == 0 || on[kept] == 0 {
			return fmt.Errorf("pods per node %v", on)
		}
		return nil
	})
	var moving []ipamv1.OverlappingRangeIPReservation
	for _, p := range before {
		rs, err := reservationsOf(ctx, cl, ns, p.Name)
		if err != nil || len(rs) != 1 || rs[0].Spec.Address != secondaryAddr(t, &p, "net1") {
			t.Fatalf("reservations of %s: %+v (%v)", p.Name, rs, err)
		}
		if p.Spec.NodeName == drained {
			moving = append(moving, rs[0])
		}
	}

	t.Cleanup(func() { _, _ = kubectl(c, "uncordon", drained) })
	if out, err := kubectl(c, "drain", drained, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=5m"); err != nil {
		t.Fatalf("kubectl drain %s: %v\n%s", drained, err, out)
	}
	released := map[string]bool{}
	after := webPods(t, c, ns, func(pods []corev1.Pod) error {
		for _, p := range pods {
			if p.Spec.NodeName != kept {
				return fmt.Errorf("pod %s on %s", p.Name, p.Spec.NodeName)
			}
		}
		for _, r := range moving {
			if released[r.Name] {
				continue
			}
			var now ipamv1.OverlappingRangeIPReservation
			err := cl.Get(ctx, client.ObjectKey{Name: r.Name}, &now)
			if err == nil && now.UID == r.UID {
				return fmt.Errorf("%s of evicted %s still reserved", r.Spec.Address, r.Spec.PodRef)
			}
			if client.IgnoreNotFound(err) != nil {
				return err
			}
			if age := time.Since(r.CreationTimestamp.Time); age >= grace {
				t.Fatalf("%s of evicted %s was seen released only %s after its creation, past the %s grace: the DEL did not release it (GC may have)", r.Spec.Address, r.Spec.PodRef, age.Round(time.Second), grace)
			}
			released[r.Name] = true
		}
		return nil
	})
	assertOwnAddresses(t, cl, ns, network, after)

	if out, err := kubectl(c, "uncordon", drained); err != nil {
		t.Fatalf("kubectl uncordon %s: %v\n%s", drained, err, out)
	}
	n, err := c.Client.CoreV1().Nodes().Get(ctx, drained, metav1.GetOptions{})
	if err != nil || n.Spec.Unschedulable {
		t.Fatalf("%s after uncordon: unschedulable %v (%v)", drained, n != nil && n.Spec.Unschedulable, err)
	}
	// The drain evicted whatever controller replica ran there; its replacement runs again.
	if err := c.WaitNetpool(ctx); err != nil {
		t.Fatalf("netpool after the drain: %v", err)
	}
}

// drainDeployment has drainReplicas pods of the test image on the storage network, spread evenly
// over the nodes that take pods (a cordoned node's taint takes it out of the count).
func drainDeployment(ns string) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](drainReplicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": "storage"}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, NodeTaintsPolicy: ptr.To(corev1.NodeInclusionPolicyHonor),
					}},
					Containers: []corev1.Container{{Name: "web", Image: cluster.TestImage, ImagePullPolicy: corev1.PullNever}},
				},
			},
		},
	}
}

// webPods waits until the Deployment has exactly drainReplicas pods, every one running with its
// network-status, none terminating, and placed as placed wants; it returns them. At every look no
// two of the pods that show a net1 address (terminating ones too) show the same one.
func webPods(t *testing.T, c *cluster.Cluster, ns string, placed func([]corev1.Pod) error) []corev1.Pod {
	t.Helper()
	var got []corev1.Pod
	poll.Eventually(t, 4*time.Minute, "the Deployment's pods running", func() error {
		list, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		if err := c.Check(); err != nil {
			t.Fatal(err)
		}
		holders := map[string]string{}
		var live []corev1.Pod
		for _, p := range list.Items {
			if p.Annotations["k8s.v1.cni.cncf.io/network-status"] != "" && p.Status.Phase == corev1.PodRunning {
				a := secondaryAddr(t, &p, "net1")
				if other, dup := holders[a]; dup {
					t.Fatalf("pods %s and %s both have %s", other, p.Name, a)
				}
				holders[a] = p.Name
			}
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		if len(live) != drainReplicas {
			return fmt.Errorf("%d pods not terminating, want %d", len(live), drainReplicas)
		}
		for _, p := range live {
			if p.Status.Phase != corev1.PodRunning || p.Annotations["k8s.v1.cni.cncf.io/network-status"] == "" {
				return fmt.Errorf("pod %s on %s: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
			}
		}
		if err := placed(live); err != nil {
			return err
		}
		got = live
		return nil
	})
	return got
}

// assertOwnAddresses waits until network's reservations are exactly the pods' net1 addresses, each
// recorded for its own pod: the evicted pods hold nothing and nobody holds two.
func assertOwnAddresses(t *testing.T, cl client.Client, ns, network string, pods []corev1.Pod) {
	t.Helper()
	want := map[string]string{}
	for _, p := range pods {
		want[secondaryAddr(t, &p, "net1")] = ns + "/" + p.Name
	}
	poll.Eventually(t, 2*time.Minute, "one reservation per running pod", func() error {
		rs, err := networkReservations(context.Background(), cl, network)
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, r := range rs {
			got[r.Spec.Address] = r.Spec.PodRef
		}
		for a, pod := range want {
			if got[a] != pod {
				t.Fatalf("%s, the net1 address of %s, is reserved for %q", a, pod, got[a])
			}
		}
		if len(got) != len(want) {
			return fmt.Errorf("reservations %v, pods %v", got, want)
		}
		return nil
	})
}

// kubectl runs the cluster's kubectl (hack/cluster-binaries.sh builds it) as cluster-admin.
func kubectl(c *cluster.Cluster, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
