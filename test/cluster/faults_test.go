package cluster_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/cluster"
	"github.com/netpool/netpool/test/poll"
)

// faultPods is how many pods TestAgentKilledDuringPodCreations creates at once.
const faultPods = 50

// TestAgentKilledDuringPodCreations: the agent of node 1 is SIGKILLed while 50 pods with a netpool
// network are being created on both nodes. kubelet restarts it, the runtime retries the sandboxes
// whose ADD failed with code 11, and in the end every pod runs with one address of its own that its
// reservation records: no duplicate, no lost allocation, no pod stuck.
func TestAgentKilledDuringPodCreations(t *testing.T) {
	c := need(t)
	ctx := context.Background()
	cl := kubeClient(t, c)
	ns := testNamespace(t, c, nil)
	applyNAD(t, c, ns, "storage", storageNAD("storage-faults", "192.168.32.0/24", "192.168.32.1"))
	n1 := c.Nodes[0]
	before := agentPod(t, c, n1.Name)
	restartsBefore := before.Status.ContainerStatuses[0].RestartCount
	errs := make(chan error, faultPods)
	for i := 0; i < faultPods; i++ {
		go func() {
			p := serverPod(ns, fmt.Sprintf("p-%d", i), c.Nodes[i%len(c.Nodes)].Name, map[string]string{"k8s.v1.cni.cncf.io/networks": "storage"})
			p.Labels["app"] = "faults"
			_, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			errs <- err
		}()
	}
	// Kill once some pods have their address and others are still on their way.
	poll.Eventually(t, 2*time.Minute, "the first reservations", func() error {
		rs, err := networkReservations(ctx, cl, "storage-faults")
		if err != nil {
			return err
		}
		if len(rs) < 3 {
			return fmt.Errorf("%d so far", len(rs))
		}
		return nil
	})
	if _, err := n1.KillContainerProcess("netpool-agent"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < faultPods; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("creating a pod: %v", err)
		}
	}
	var pods *corev1.PodList
	poll.Eventually(t, 6*time.Minute, "every pod Running with its net1 address", func() error {
		var err error
		pods, err = c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=faults"})
		if err != nil {
			return err
		}
		if err := c.Check(); err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Annotations["k8s.v1.cni.cncf.io/network-status"] != "" {
				running++
			}
		}
		if running != faultPods {
			return fmt.Errorf("%d of %d running", running, faultPods)
		}
		return nil
	})
	after := agentPod(t, c, n1.Name)
	if after.UID != before.UID || after.Status.ContainerStatuses[0].RestartCount <= restartsBefore {
		t.Errorf("the agent on %s: pod %s restarts %d, before pod %s restarts %d: kubelet did not restart its container",
			n1.Name, after.UID, after.Status.ContainerStatuses[0].RestartCount, before.UID, restartsBefore)
	}
	// Every pod's address is its own and recorded, at every moment; a sandbox whose ADD the agent
	// completed but could not answer (it died first) holds a second address for its pod until the
	// runtime's DEL of that dead sandbox, retried once the agent is back, releases it.
	want := map[string]string{}
	for _, p := range pods.Items {
		want[ns+"/"+p.Name] = secondaryAddr(t, &p, "net1")
	}
	poll.Eventually(t, 4*time.Minute, "one reservation per pod, its net1 address", func() error {
		rs, err := networkReservations(ctx, cl, "storage-faults")
		if err != nil {
			return err
		}
		holders := map[string]string{}
		has := map[string]bool{}
		for _, r := range rs {
			if other, dup := holders[r.Spec.Address]; dup {
				t.Fatalf("%s reserved twice: %s and %s", r.Spec.Address, other, r.Spec.PodRef)
			}
			holders[r.Spec.Address] = r.Spec.PodRef
			if want[r.Spec.PodRef] == r.Spec.Address {
				has[r.Spec.PodRef] = true
			}
		}
		for pod, addr := range want {
			if !has[pod] {
				t.Fatalf("pod %s has %s on net1 and no reservation of it (reservations %v)", pod, addr, holders)
			}
		}
		if len(rs) != len(want) {
			return fmt.Errorf("%d reservations for %d pods: %v", len(rs), len(want), holders)
		}
		return nil
	})
	// The pods go now, so that the tests after this one start from idle nodes.
	if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=faults"}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 3*time.Minute, "the pods' addresses released", func() error {
		rs, err := networkReservations(ctx, cl, "storage-faults")
		if err != nil {
			return err
		}
		if len(rs) > 0 {
			return fmt.Errorf("%d still reserved", len(rs))
		}
		return nil
	})
}

// networkReservations lists the reservations of a network.
func networkReservations(ctx context.Context, cl client.Client, network string) ([]ipamv1.OverlappingRangeIPReservation, error) {
	var list ipamv1.OverlappingRangeIPReservationList
	if err := cl.List(ctx, &list); err != nil {
		return nil, err
	}
	var out []ipamv1.OverlappingRangeIPReservation
	for _, r := range list.Items {
		if r.Spec.NetworkName == network {
			out = append(out, r)
		}
	}
	return out, nil
}

// TestKubeletAndContainerdRestart: a pod with a netpool address keeps running, and keeps its
// address, across a restart of its node's kubelet and then of its containerd; after each the node
// starts a new pod that gets an address of its own; the first pod's delete still releases its
// address.
func TestKubeletAndContainerdRestart(t *testing.T) {
	c := need(t)
	ctx := context.Background()
	cl := kubeClient(t, c)
	ns := testNamespace(t, c, nil)
	applyNAD(t, c, ns, "storage", storageNAD("storage-restart", "192.168.36.0/24", "192.168.36.1"))
	n1 := c.Nodes[0]
	nets := map[string]string{"k8s.v1.cni.cncf.io/networks": "storage"}
	a := createRunning(t, c, serverPod(ns, "a", n1.Name, nets))
	addrA := secondaryAddr(t, a, "net1")
	seen := map[string]string{addrA: "a"}
	for _, step := range []struct {
		what    string
		restart func() error
	}{{"kubelet", n1.RestartKubelet}, {"containerd", n1.RestartContainerd}} {
		if err := step.restart(); err != nil {
			t.Fatalf("restarting %s: %v", step.what, err)
		}
		waitNodeReady(t, c, n1.Name)
		poll.Eventually(t, time.Minute, "pod a answers after the "+step.what+" restart", func() error {
			ans, err := ask(a.Status.PodIP, "")
			if err == nil && !ans.hasAddr("net1", addrA) {
				return fmt.Errorf("net1 is %v, was %s", ans.Addrs["net1"], addrA)
			}
			return err
		})
		now, err := c.Client.CoreV1().Pods(ns).Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if now.UID != a.UID || now.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Fatalf("after the %s restart pod a is %s with %d restarts", step.what, now.UID, now.Status.ContainerStatuses[0].RestartCount)
		}
		assertReservations(t, cl, ns, "a", addrA)
		name := "after-" + step.what
		p := createRunning(t, c, serverPod(ns, name, n1.Name, nets))
		addr := secondaryAddr(t, p, "net1")
		if other, dup := seen[addr]; dup {
			t.Fatalf("%s got %s, which %s holds", name, addr, other)
		}
		seen[addr] = name
	}
	deletePod(t, c, ns, "a")
	waitReleased(t, cl, ns, "a")
}

func waitNodeReady(t *testing.T, c *cluster.Cluster, name string) {
	t.Helper()
	poll.Eventually(t, 2*time.Minute, name+" Ready", func() error {
		n, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cd := range n.Status.Conditions {
			if cd.Type == corev1.NodeReady && cd.Status == corev1.ConditionTrue && time.Since(cd.LastHeartbeatTime.Time) < 20*time.Second {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", n.Status.Conditions)
	})
}

// TestControllerFailover: deleting the pod that leads the controller's election hands the Lease to
// the other replica, which then reconciles: a pool's status counts an allocation made after the
// hand-over, and GC still runs: a reservation leaked just before the hand-over (its pod never
// existed, so no DEL will come) is released by the new leader once the grace has passed.
func TestControllerFailover(t *testing.T) {
	c := need(t)
	ctx := context.Background()
	cl := kubeClient(t, c)
	holder := func() (string, error) {
		var l coordinationv1.Lease
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "netpool-system", Name: "netpool-controller"}, &l); err != nil {
			return "", err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return "", fmt.Errorf("no holder")
		}
		return strings.SplitN(*l.Spec.HolderIdentity, "_", 2)[0], nil
	}
	ns := testNamespace(t, c, nil)
	pool := &ipamv1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-failover"},
		Spec:       ipamv1.IPPoolSpec{Range: "10.79.0.0/24", NetworkName: "cluster-failover"},
	}
	if err := cl.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), pool) })
	applyNAD(t, c, ns, "failover", `{"cniVersion": "1.0.0", "name": "cluster-failover", "type": "macvlan", "master": "eth1", "mode": "bridge",
 "ipam": {"type": "netpool", "datastore": "kubernetes", "pool": "cluster-failover"}}`)
	nets := map[string]string{"k8s.v1.cni.cncf.io/networks": "failover"}
	first := createRunning(t, c, serverPod(ns, "first", c.Nodes[len(c.Nodes)-1].Name, nets))
	leak := leakReservation(t, cl, ns, first)
	var leader string
	poll.Eventually(t, time.Minute, "a leader", func() error {
		var err error
		leader, err = holder()
		return err
	})
	if err := c.Client.CoreV1().Pods("netpool-system").Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the leader %s: %v", leader, err)
	}
	var next string
	poll.Eventually(t, 2*time.Minute, "another replica leads", func() error {
		h, err := holder()
		if err != nil {
			return err
		}
		if h == leader {
			return fmt.Errorf("still %s", h)
		}
		p, err := c.Client.CoreV1().Pods("netpool-system").Get(ctx, h, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.DeletionTimestamp != nil {
			return fmt.Errorf("%s is going", h)
		}
		next = h
		return nil
	})
	t.Logf("leader %s deleted; %s leads", leader, next)
	var still ipamv1.OverlappingRangeIPReservation
	err := cl.Get(ctx, client.ObjectKey{Name: leak.Name}, &still)
	if age := time.Since(leak.CreationTimestamp.Time); age < gcGrace && err != nil {
		t.Fatalf("the leaked %s went %s after it was made, within the grace, before %s led: %v", leak.Spec.Address, age.Round(time.Second), next, err)
	}
	createRunning(t, c, serverPod(ns, "p", c.Nodes[len(c.Nodes)-1].Name, nets))
	poll.Eventually(t, 3*time.Minute, "the new leader releases the leak and counts the pods' allocations", func() error {
		err := cl.Get(ctx, client.ObjectKey{Name: leak.Name}, &still)
		if err == nil {
			return fmt.Errorf("the leaked %s still reserved", leak.Spec.Address)
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		var p ipamv1.IPPool
		if err := cl.Get(ctx, client.ObjectKey{Name: pool.Name}, &p); err != nil {
			return err
		}
		if p.Status.Allocated == nil || *p.Status.Allocated != 2 {
			return fmt.Errorf("status.allocated %v", p.Status.Allocated)
		}
		return nil
	})
	if age := time.Since(leak.CreationTimestamp.Time); age < gcGrace {
		t.Fatalf("the leaked %s released %s after it was made, within the grace %s", leak.Spec.Address, age.Round(time.Second), gcGrace)
	}
	if err := c.WaitNetpool(ctx); err != nil {
		t.Fatalf("the controller Deployment after the failover: %v", err)
	}
}

// leakReservation makes what an agent that crashed after its Create would leave: a reservation in
// the pool of real's (a running pod's) reservation, next to it, for a pod that never existed, on
// real's node. Its name is derived from its address as real's is from real's.
func leakReservation(t *testing.T, cl client.Client, ns string, real *corev1.Pod) *ipamv1.OverlappingRangeIPReservation {
	t.Helper()
	ctx := context.Background()
	rs, err := reservationsOf(ctx, cl, ns, real.Name)
	if err != nil || len(rs) != 1 {
		t.Fatalf("the reservations of %s: %v %v", real.Name, rs, err)
	}
	r := rs[0]
	addr, err := netip.ParseAddr(r.Spec.Address)
	if err != nil {
		t.Fatal(err)
	}
	leakAddr := addr.Next().Next()
	base, ok := strings.CutSuffix(r.Name, r.Spec.Address)
	if !ok {
		t.Fatalf("reservation %s is not named after its address %s", r.Name, r.Spec.Address)
	}
	leak := &ipamv1.OverlappingRangeIPReservation{
		ObjectMeta: metav1.ObjectMeta{Name: base + leakAddr.String(), Labels: r.Labels, Annotations: r.Annotations},
		Spec:       r.Spec,
	}
	leak.Spec.Address = leakAddr.String()
	leak.Spec.PodRef = ns + "/never-was"
	leak.Spec.PodUID = "00000000-0000-0000-0000-000000000001"
	leak.Spec.ContainerID = "leaked-by-a-crashed-agent"
	if err := cl.Create(ctx, leak); err != nil {
		t.Fatalf("creating the leaked reservation: %v", err)
	}
	return leak
}
