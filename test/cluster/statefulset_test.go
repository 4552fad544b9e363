package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/cluster"
	"github.com/netpool/netpool/test/poll"
)

// TestStatefulSetSticky: with a Sticky pool, the StatefulSet controller's replacement of a deleted
// db-1, started by a kubelet through Multus, gets db-1's address back. Scaled to 1, the addresses
// of db-1 and db-2 stay while their pods exist and until the GC grace has passed since they were
// reserved, and then the controller releases them; db-0 keeps its own.
func TestStatefulSetSticky(t *testing.T) {
	// Most of this test is the controller's GC grace passing; it shares no namespace, range or
	// pool with any other test and changes no node, so it waits beside the other one that does
	// (TestIPAMClaimMigration, TestStatefulSetSticky) once every sequential test has run.
	t.Parallel()
	c := need(t)
	ctx := context.Background()
	cl := kubeClient(t, c)
	ns := testNamespace(t, c, nil)
	pool := &ipamv1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-sts-db"},
		Spec:       ipamv1.IPPoolSpec{Range: "10.78.0.0/24", NetworkName: "cluster-sts-db", StatefulSets: ipamv1.StatefulSetsSticky},
	}
	if err := cl.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), pool) })
	applyNAD(t, c, ns, "db-net", `{"cniVersion": "1.0.0", "name": "cluster-sts-db", "type": "macvlan", "master": "eth1", "mode": "bridge",
 "ipam": {"type": "netpool", "datastore": "kubernetes", "pool": "cluster-sts-db"}}`)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](3),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}, Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": "db-net"}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers:                    []corev1.Container{{Name: "db", Image: cluster.TestImage, ImagePullPolicy: corev1.PullNever}},
				},
			},
		},
	}
	if _, err := c.Client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{}
	for _, name := range []string{"db-0", "db-1", "db-2"} {
		addrs[name] = secondaryAddr(t, waitRunningNamed(t, c, ns, name, ""), "net1")
	}
	if addrs["db-0"] == addrs["db-1"] || addrs["db-1"] == addrs["db-2"] || addrs["db-0"] == addrs["db-2"] {
		t.Fatalf("addresses %v", addrs)
	}
	old, err := c.Client.CoreV1().Pods(ns).Get(ctx, "db-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "db-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := waitRunningNamed(t, c, ns, "db-1", old.UID)
	if got := secondaryAddr(t, again, "net1"); got != addrs["db-1"] {
		t.Fatalf("db-1 recreated (on %s) got %s, had %s", again.Spec.NodeName, got, addrs["db-1"])
	}
	assertReservations(t, cl, ns, "db-1", addrs["db-1"])
	scaleDown(t, c, cl, ns, addrs)
}

// scaleDown scales the StatefulSet db to 1 and checks what the controller releases, and when.
func scaleDown(t *testing.T, c *cluster.Cluster, cl client.Client, ns string, addrs map[string]string) {
	ctx := context.Background()
	byAddr := func() (map[string]ipamv1.OverlappingRangeIPReservation, error) {
		rs, err := networkReservations(ctx, cl, "cluster-sts-db")
		if err != nil {
			return nil, err
		}
		m := map[string]ipamv1.OverlappingRangeIPReservation{}
		for _, r := range rs {
			m[r.Spec.Address] = r
		}
		return m, nil
	}
	before, err := byAddr()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"db-0", "db-1", "db-2"} {
		if _, ok := before[addrs[name]]; !ok || len(before) != 3 {
			t.Fatalf("before the scale-down: reservations %v, want one for each of %v", before, addrs)
		}
	}
	scale, err := c.Client.AppsV1().StatefulSets(ns).GetScale(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 1
	if _, err := c.Client.AppsV1().StatefulSets(ns).UpdateScale(ctx, "db", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Every removed ordinal's address stays while its pod exists and until the grace has passed
	// since it was reserved; once both conditions are over, the controller releases it.
	released := map[string]bool{}
	poll.Eventually(t, 3*time.Minute, "db-1's and db-2's addresses released after the scale-down", func() error {
		now, err := byAddr()
		if err != nil {
			return err
		}
		pending := 0
		for _, name := range []string{"db-1", "db-2"} {
			r := before[addrs[name]]
			_, reserved := now[addrs[name]]
			// A pod being deleted may have run its DEL, which unbinds it: only a pod not
			// being deleted must keep its address.
			pod, perr := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			podExists := perr == nil && pod.DeletionTimestamp == nil
			if !reserved && !released[name] {
				released[name] = true
				if podExists {
					t.Fatalf("%s's address %s released while the pod still exists and is not being deleted", name, addrs[name])
				}
				if age := time.Since(r.CreationTimestamp.Time); age < gcGrace {
					t.Fatalf("%s's address %s released %s after it was reserved, within the GC grace %s", name, addrs[name], age.Round(time.Second), gcGrace)
				}
				t.Logf("%s's address %s released %s after it was reserved", name, addrs[name], time.Since(r.CreationTimestamp.Time).Round(time.Second))
			}
			if reserved {
				pending++
			}
		}
		if pending > 0 {
			return fmt.Errorf("%d still reserved", pending)
		}
		return nil
	})
	now, err := byAddr()
	if err != nil {
		t.Fatal(err)
	}
	kept, ok := now[addrs["db-0"]]
	if len(now) != 1 || !ok || kept.UID != before[addrs["db-0"]].UID {
		t.Fatalf("after the scale-down: reservations %v, want db-0's %s (UID %s) alone", now, addrs["db-0"], before[addrs["db-0"]].UID)
	}
	p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := secondaryAddr(t, p, "net1"); got != addrs["db-0"] {
		t.Fatalf("db-0 has %s after the scale-down, had %s", got, addrs["db-0"])
	}
}

// waitRunningNamed waits until a pod called name, other than the one with UID notUID, runs.
func waitRunningNamed(t *testing.T, c *cluster.Cluster, ns, name string, notUID types.UID) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	poll.Eventually(t, 3*time.Minute, "pod "+ns+"/"+name+" Running", func() error {
		p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if notUID != "" && p.UID == notUID {
			return fmt.Errorf("still the old pod")
		}
		if p.Status.Phase != corev1.PodRunning || p.Annotations["k8s.v1.cni.cncf.io/network-status"] == "" {
			return fmt.Errorf("phase %s, %v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		got = p
		return nil
	})
	return got
}

func assertReservations(t *testing.T, cl client.Client, ns, pod, addr string) {
	t.Helper()
	rs, err := reservationsOf(context.Background(), cl, ns, pod)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Spec.Address != addr {
		t.Fatalf("reservations of %s/%s: %+v, want one of %s", ns, pod, rs, addr)
	}
}
