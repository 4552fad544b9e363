package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/controller"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/podowner"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/poll"
)

// TestStickyStatefulSets runs a StatefulSet's life on a real API server with two node agents and
// the controller, through libcni into network namespaces, in a pool with statefulSets: Sticky.
// envtest runs no StatefulSet controller, so the test creates and deletes the pods as it would.
// db-0..2 get A, B, C; db-1 recreated (a new UID, on the other node) gets B again; scaling to 1
// keeps B and C while db-1 and db-2 still run, releases them once they are gone, and keeps A;
// deleting the StatefulSet releases A.
func TestStickyStatefulSets(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ctx := testContext(t)
	env := envtest.Start(t) // its own API server: the controller's GC runs cluster-wide
	const grace = time.Second
	c := mustControllerWith(t, env, func(o *controller.Options) {
		o.GCGrace, o.SweepInterval = grace, 500*time.Millisecond
		o.Registerer = prometheus.NewRegistry() // its own: TestIPAMClaims runs a controller at the same time
	})
	const (
		network = "db-net"
		subnet  = "10.78.0.0/24"
		ns      = "apps"
	)
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	fields := map[string]any{"range": subnet, "gateway": "10.78.0.1", "statefulSets": "Sticky"}
	nodes := twoNodes(t, env, network, "np-ssbr", fields)
	nodeA, nodeB := nodes[0], nodes[1]
	sts := mustStatefulSet(ctx, t, c, ns, "db", 3)

	type member struct {
		pod  *corev1.Pod
		att  *libcni.RuntimeConf
		node string
	}
	start := func(t *testing.T, name string, ordinal int, node string, containerID string) (member, netip.Prefix) {
		t.Helper()
		pod := mustStatefulSetPod(ctx, t, c, sts, name, ordinal, node)
		att := podAttachment(containerID, mustNetNS(t), "net1", ns, pod.Name)
		att.Args = append(att.Args, [2]string{"K8S_POD_UID", string(pod.UID)})
		n := nodeA
		if node == "node-b" {
			n = nodeB
		}
		return member{pod: pod, att: att, node: node}, resultIPs(t, mustAdd(ctx, t, n, att))[0]
	}
	stop := func(t *testing.T, m member) {
		t.Helper()
		n := nodeA
		if m.node == "node-b" {
			n = nodeB
		}
		mustDel(ctx, t, n, m.att)
		must(t, c.Delete(ctx, m.pod, client.GracePeriodSeconds(0))) // no kubelet confirms a graceful end
	}
	db0, a := start(t, "db-0", 0, "node-a", "ss-db-0")
	db1, b := start(t, "db-1", 1, "node-a", "ss-db-1")
	db2, cc := start(t, "db-2", 2, "node-b", "ss-db-2")
	if a == b || b == cc || a == cc {
		t.Fatalf("db-0..2 got %s, %s, %s; want three addresses", a, b, cc)
	}
	for i, ip := range []netip.Prefix{a, b, cc} {
		r := claimedReservation(ctx, t, c, ip.Addr())
		want := fmt.Sprintf("StatefulSet/%s/db/%d/net1", ns, i)
		if r.Spec.Owner == nil || r.Spec.Owner.Key() != want || r.Labels[ipamv1.OwnerLabel] != ipamv1.OwnerLabelValue(want) {
			t.Fatalf("reservation of db-%d (%s): owner %+v labels %v; want owner %s with its label", i, ip, r.Spec.Owner, r.Labels, want)
		}
	}

	t.Run("a recreated pod gets its address on another node", func(t *testing.T) {
		stop(t, db1)
		if r := claimedReservation(ctx, t, c, b.Addr()); len(r.Spec.Users) != 0 {
			t.Fatalf("after db-1's DEL the reservation of %s has users %+v, want none (held for the ordinal)", b, r.Spec.Users)
		}
		// The GC judges the reservation, older than the grace, while no pod uses it: it must stay.
		time.Sleep(3 * grace)
		var got netip.Prefix
		db1, got = start(t, "db-1", 1, "node-b", "ss-db-1-again")
		if got != b {
			t.Fatalf("db-1 recreated on node-b got %s, want its ordinal's %s", got, b)
		}
		if r := claimedReservation(ctx, t, c, b.Addr()); r.Spec.Node != "node-b" || r.Spec.PodUID != string(db1.pod.UID) {
			t.Fatalf("the reservation of %s is on %s for pod UID %s; want node-b and the new pod's %s", b, r.Spec.Node, r.Spec.PodUID, db1.pod.UID)
		}
	})

	t.Run("a pod of no StatefulSet owns its address", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
		must(t, c.Create(ctx, pod))
		att := podAttachment("ss-plain", mustNetNS(t), "net1", ns, pod.Name)
		ip := resultIPs(t, mustAdd(ctx, t, nodeA, att))[0]
		if r := claimedReservation(ctx, t, c, ip.Addr()); r.Spec.Owner != nil {
			t.Fatalf("reservation of a pod of no StatefulSet has owner %+v", r.Spec.Owner)
		}
		mustDel(ctx, t, nodeA, att)
		if r, err := reservationAt(ctx, c, ip.Addr()); err != nil || r != nil {
			t.Fatalf("DEL of a pod of no StatefulSet left reservation %v (%v)", r, err)
		}
	})

	t.Run("a requested address wins and is remembered", func(t *testing.T) {
		cache := mustStatefulSet(ctx, t, c, ns, "cache", 1)
		run := func(containerID string, ips ...string) (*corev1.Pod, *libcni.RuntimeConf, netip.Prefix) {
			t.Helper()
			pod := mustStatefulSetPod(ctx, t, c, cache, "cache-0", 0, "node-a")
			att := podAttachment(containerID, mustNetNS(t), "net1", ns, pod.Name)
			if ips != nil {
				att.CapabilityArgs = map[string]any{"ips": ips}
			}
			return pod, att, resultIPs(t, mustAdd(ctx, t, nodeA, att))[0]
		}
		end := func(pod *corev1.Pod, att *libcni.RuntimeConf) {
			t.Helper()
			mustDel(ctx, t, nodeA, att)
			must(t, c.Delete(ctx, pod, client.GracePeriodSeconds(0)))
		}
		pod, att, got := run("ss-cache-1", "10.78.0.200/24")
		if got.Addr() != netip.MustParseAddr("10.78.0.200") {
			t.Fatalf("cache-0 requesting 10.78.0.200 got %s", got)
		}
		end(pod, att)
		if pod, att, got = run("ss-cache-2"); got.Addr() != netip.MustParseAddr("10.78.0.200") {
			t.Fatalf("cache-0 recreated without ips got %s, want the requested 10.78.0.200 it holds", got)
		}
		end(pod, att)
		if pod, att, got = run("ss-cache-3", "10.78.0.201/24"); got.Addr() != netip.MustParseAddr("10.78.0.201") {
			t.Fatalf("cache-0 requesting 10.78.0.201 got %s", got)
		}
		// No agent deletes a persistently owned reservation: the old address, unbound, gives way
		// to the one cache-0's pod is bound to, and the controller releases it (Superseded).
		poll.Eventually(t, 30*time.Second, "the release of 10.78.0.200", func() error {
			r, err := reservationAt(ctx, c, netip.MustParseAddr("10.78.0.200"))
			if err == nil && r != nil {
				err = fmt.Errorf("reservation %s still there", r.Name)
			}
			return err
		})
		end(pod, att)
		must(t, c.Delete(ctx, cache))
		poll.Eventually(t, 30*time.Second, "the release of 10.78.0.201", func() error {
			r, err := reservationAt(ctx, c, netip.MustParseAddr("10.78.0.201"))
			if err == nil && r != nil {
				err = fmt.Errorf("reservation %s still there", r.Name)
			}
			return err
		})
	})

	t.Run("scaling to 1 releases the ordinals above once their pods are gone", func(t *testing.T) {
		// The StatefulSet controller lowers replicas first; its pods terminate after.
		sts.Spec.Replicas = ptr.To[int32](1)
		must(t, c.Update(ctx, sts))
		time.Sleep(4 * grace) // judged at once (the scale-down queues them) and at every sweep
		for _, ip := range []netip.Prefix{b, cc} {
			if r, err := reservationAt(ctx, c, ip.Addr()); err != nil || r == nil {
				t.Fatalf("%s was released while its pod still runs (%v): a new pod could get it", ip, err)
			}
		}
		stop(t, db2)                                                  // DEL, then the pod goes
		must(t, c.Delete(ctx, db1.pod, client.GracePeriodSeconds(0))) // gone without a DEL: its user is stale
		for _, ip := range []netip.Prefix{b, cc} {
			poll.Eventually(t, 30*time.Second, "the release of "+ip.String(), func() error {
				r, err := reservationAt(ctx, c, ip.Addr())
				if err == nil && r != nil {
					err = fmt.Errorf("reservation %s still there", r.Name)
				}
				return err
			})
		}
		if r := claimedReservation(ctx, t, c, a.Addr()); r.Spec.ContainerID != db0.att.ContainerID {
			t.Fatalf("after the scale-down the reservation of db-0's %s is held by %s", a, r.Spec.ContainerID)
		}

		t.Run("deleting the StatefulSet releases the rest", func(t *testing.T) {
			stop(t, db0)
			must(t, c.Delete(ctx, sts))
			poll.Eventually(t, 30*time.Second, "the release of "+a.String(), func() error {
				r, err := reservationAt(ctx, c, a.Addr())
				if err == nil && r != nil {
					err = fmt.Errorf("reservation %s still there", r.Name)
				}
				return err
			})
		})
	})
}

// mustStatefulSet creates a StatefulSet with replicas pods (none is started: envtest has no
// StatefulSet controller).
func mustStatefulSet(ctx context.Context, t *testing.T, c client.Client, ns, name string, replicas int32) *appsv1.StatefulSet {
	t.Helper()
	labels := map[string]string{"app": name}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db"}}},
			},
		},
	}
	must(t, c.Create(ctx, sts))
	return sts
}

// mustStatefulSetPod creates pod name of sts as the StatefulSet controller would (controlled by
// it, with the pod-index label), scheduled to node.
func mustStatefulSetPod(ctx context.Context, t *testing.T, c client.Client, sts *appsv1.StatefulSet, name string, ordinal int, node string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: sts.Namespace, Name: name,
			Labels: map[string]string{"app": sts.Name, podowner.PodIndexLabel: fmt.Sprint(ordinal)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name,
				UID: sts.UID, Controller: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "db", Image: "db"}}},
	}
	must(t, c.Create(ctx, pod))
	return pod
}
