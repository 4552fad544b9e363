package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// fixture makes API objects for one test, in a namespace of its own, and removes every netpool
// object, node and pod when the test ends, so the next test's manager finds a clean cluster.
type fixture struct {
	t   *testing.T
	ctx context.Context
	ns  string
}

var namespaceSeq atomic.Int64

// newFixture creates the test's namespace (with labels) and registers the cleanup.
func newFixture(t *testing.T, labels map[string]string) *fixture {
	t.Helper()
	if env == nil {
		t.Skip("envtest did not start")
	}
	f := &fixture{t: t, ctx: context.Background(), ns: fmt.Sprintf("t%d-%d", namespaceSeq.Add(1), time.Now().UnixNano()%100000)}
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns, Labels: labels}})
	t.Cleanup(f.cleanup)
	return f
}

// cleanup deletes what tests make. Namespaces stay (envtest runs no namespace controller); each
// test has its own.
func (f *fixture) cleanup() {
	ctx, c := f.ctx, direct
	for _, obj := range []client.Object{
		&ipamv1.OverlappingRangeIPReservation{}, &ipamv1.IPPoolSlice{}, &ipamv1.IPPool{}, &corev1.Node{},
	} {
		if err := c.DeleteAllOf(ctx, obj); err != nil {
			f.t.Errorf("cleaning up %T: %v", obj, err)
		}
	}
	releasePools(f.t)
	for _, obj := range []client.Object{&corev1.Pod{}, &nadv1.NetworkAttachmentDefinition{}} {
		if err := c.DeleteAllOf(ctx, obj, client.InNamespace(f.ns), client.GracePeriodSeconds(0)); err != nil {
			f.t.Errorf("cleaning up %T: %v", obj, err)
		}
	}
}

// releasePools removes the controller's finalizer from every pool, so pools deleted after the
// test's manager stopped go at once and the next test can reuse their names.
func releasePools(t *testing.T) {
	ctx := context.Background()
	var pools ipamv1.IPPoolList
	if err := direct.List(ctx, &pools); err != nil {
		t.Errorf("listing pools: %v", err)
		return
	}
	for i := range pools.Items {
		p := &pools.Items[i]
		if len(p.Finalizers) == 0 {
			continue
		}
		orig := p.DeepCopy()
		p.Finalizers = nil
		if err := direct.Patch(ctx, p, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("removing the finalizers of pool %s: %v", p.Name, err)
		}
	}
}

func (f *fixture) create(obj client.Object) {
	f.t.Helper()
	if err := direct.Create(f.ctx, obj); err != nil {
		f.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// node creates a Node.
func (f *fixture) node(name string) *corev1.Node {
	f.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	f.create(n)
	return n
}

// pool creates an IPPool of cidr in network.
func (f *fixture) pool(name, cidr, network string) *ipamv1.IPPool {
	f.t.Helper()
	p := &ipamv1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       ipamv1.IPPoolSpec{Range: cidr, NetworkName: network},
	}
	f.create(p)
	return p
}

// pod creates a pod in the fixture's namespace; with a phase, its status says so; with ips, its
// network-status lists them.
func (f *fixture) pod(name string, phase corev1.PodPhase, ips ...string) *corev1.Pod {
	f.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	if ips != nil {
		p.Annotations = map[string]string{nadv1.NetworkStatusAnnot: networkStatus(ips...)}
	}
	f.create(p)
	if phase != "" {
		f.setPhase(p, phase)
	}
	return p
}

// setPhase writes a pod's status.phase, as a kubelet would.
func (f *fixture) setPhase(p *corev1.Pod, phase corev1.PodPhase) {
	f.t.Helper()
	p.Status.Phase = phase
	if err := direct.Status().Update(f.ctx, p); err != nil {
		f.t.Fatalf("setting the phase of pod %s: %v", p.Name, err)
	}
}

// setNetworkStatus writes a pod's network-status annotation listing ips, as Multus would.
func (f *fixture) setNetworkStatus(p *corev1.Pod, ips ...string) {
	f.t.Helper()
	patch := client.MergeFrom(p.DeepCopy())
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[nadv1.NetworkStatusAnnot] = networkStatus(ips...)
	if err := direct.Patch(f.ctx, p, patch); err != nil {
		f.t.Fatalf("writing the network-status of pod %s: %v", p.Name, err)
	}
}

// deletePod deletes a pod at once (no kubelet runs to finish a graceful deletion).
func (f *fixture) deletePod(p *corev1.Pod) {
	f.t.Helper()
	if err := direct.Delete(f.ctx, p, client.GracePeriodSeconds(0)); err != nil {
		f.t.Fatalf("deleting pod %s: %v", p.Name, err)
	}
}

// reservation creates the reservation of addr in pool for pod (none when nil) on node, as the
// agent makes it.
func (f *fixture) reservation(pool, addr string, pod *corev1.Pod, node string) *ipamv1.OverlappingRangeIPReservation {
	f.t.Helper()
	r := newReservation(pool, addr, pod, node)
	f.create(r)
	return r
}

// newReservation is the reservation of addr in pool for pod on node, named as the agent names it.
func newReservation(pool, addr string, pod *corev1.Pod, node string) *ipamv1.OverlappingRangeIPReservation {
	a := netip.MustParseAddr(addr)
	r := &ipamv1.OverlappingRangeIPReservation{
		ObjectMeta: metav1.ObjectMeta{
			Name:   ipamv1.ReservationName(pool, a),
			Labels: map[string]string{ipamv1.NodeLabel: ipamv1.LabelValue(node), ipamv1.PoolLabel: ipamv1.LabelValue(pool)},
		},
		Spec: ipamv1.OverlappingRangeIPReservationSpec{
			Address: a.String(), Pool: pool, ContainerID: "c" + strings.NewReplacer(".", "", ":", "").Replace(addr),
			IfName: "net1", Node: node,
		},
	}
	if pod != nil {
		r.Spec.PodRef = pod.Namespace + "/" + pod.Name
		r.Spec.PodUID = string(pod.UID)
	}
	return r
}

// slice creates block index (cidr) of pool, owned by node.
func (f *fixture) slice(pool string, index uint64, cidr, node string) *ipamv1.IPPoolSlice {
	f.t.Helper()
	s := &ipamv1.IPPoolSlice{
		ObjectMeta: metav1.ObjectMeta{Name: ipamv1.SliceName(pool, index)},
		Spec:       ipamv1.IPPoolSliceSpec{Pool: pool, Range: cidr, Node: node},
	}
	f.create(s)
	return s
}

// nad creates a NetworkAttachmentDefinition with config.
func (f *fixture) nad(name, config string) *nadv1.NetworkAttachmentDefinition {
	f.t.Helper()
	n := &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: config},
	}
	f.create(n)
	return n
}

// eventsFor returns the notes of the Events of type and reason about the object with uid.
func eventsFor(t *testing.T, uid types.UID, eventType, reason string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := direct.List(context.Background(), &list); err != nil {
		t.Fatalf("listing events: %v", err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.UID == uid && e.Type == eventType && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// networkStatus is a network-status annotation listing ips on one attachment.
func networkStatus(ips ...string) string {
	data, err := json.Marshal([]nadv1.NetworkStatus{{Name: "default/net1", Interface: "net1", IPs: ips}})
	if err != nil {
		panic(err)
	}
	return string(data)
}
