package ctrltest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"sync"
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
	"github.com/netpool/netpool/test/envtest"
)

// Fixture makes API objects for one test, in a namespace of its own, and removes every netpool
// object, node and pod when the test ends, so the next test's manager finds a clean cluster.
type Fixture struct {
	T   *testing.T
	Ctx context.Context
	// NS is the test's namespace.
	NS string
	// Env is the package's shared API server, with the NAD CRD installed.
	Env *envtest.Env
	// C is a client of Env's admin user with no cache: tests assert with it on what the API
	// server holds.
	C client.Client
}

var namespaceSeq atomic.Int64

// nadInstalled records the shared Envs whose NAD CRD is installed.
var nadInstalled sync.Map

// SharedEnv returns the package's shared API server (envtest.Shared) with Multus' NAD CRD
// installed: the NAD reconciler, the derived pools and the EgressRouter reconciler read NADs.
func SharedEnv(t *testing.T) *envtest.Env {
	t.Helper()
	env := envtest.Shared(t)
	if _, done := nadInstalled.Load(env); !done {
		env.InstallNADCRD(t)
		nadInstalled.Store(env, true)
	}
	return env
}

// NewFixture creates the test's namespace (with labels) on the shared Env and registers the
// cleanup.
func NewFixture(t *testing.T, labels map[string]string) *Fixture {
	t.Helper()
	env := SharedEnv(t)
	f := &Fixture{T: t, Ctx: context.Background(), NS: fmt.Sprintf("t%d-%d", namespaceSeq.Add(1), time.Now().UnixNano()%100000),
		Env: env, C: env.Client}
	f.Create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.NS, Labels: labels}})
	t.Cleanup(f.cleanup)
	return f
}

// cleanup deletes what tests make. Namespaces stay (envtest runs no namespace controller); each
// test has its own.
func (f *Fixture) cleanup() {
	ctx, c := f.Ctx, f.C
	for _, obj := range []client.Object{
		&ipamv1.OverlappingRangeIPReservation{}, &ipamv1.IPPoolSlice{}, &ipamv1.IPPool{}, &corev1.Node{},
	} {
		if err := c.DeleteAllOf(ctx, obj); err != nil {
			f.T.Errorf("cleaning up %T: %v", obj, err)
		}
	}
	f.releasePools()
	for _, obj := range []client.Object{&corev1.Pod{}, &nadv1.NetworkAttachmentDefinition{}} {
		if err := c.DeleteAllOf(ctx, obj, client.InNamespace(f.NS), client.GracePeriodSeconds(0)); err != nil {
			f.T.Errorf("cleaning up %T: %v", obj, err)
		}
	}
}

// releasePools removes the controller's finalizer from every pool, so pools deleted after the
// test's manager stopped go at once and the next test can reuse their names.
func (f *Fixture) releasePools() {
	ctx, t := f.Ctx, f.T
	var pools ipamv1.IPPoolList
	if err := f.C.List(ctx, &pools); err != nil {
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
		if err := f.C.Patch(ctx, p, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("removing the finalizers of pool %s: %v", p.Name, err)
		}
	}
}

func (f *Fixture) Create(obj client.Object) {
	f.T.Helper()
	if err := f.C.Create(f.Ctx, obj); err != nil {
		f.T.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// Node creates a Node.
func (f *Fixture) Node(name string) *corev1.Node {
	f.T.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	f.Create(n)
	return n
}

// Pool creates an IPPool of cidr in network.
func (f *Fixture) Pool(name, cidr, network string) *ipamv1.IPPool {
	f.T.Helper()
	p := &ipamv1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       ipamv1.IPPoolSpec{Range: cidr, NetworkName: network},
	}
	f.Create(p)
	return p
}

// Pod creates a pod in the fixture's namespace; with a phase, its status says so; with ips, its
// network-status lists them.
func (f *Fixture) Pod(name string, phase corev1.PodPhase, ips ...string) *corev1.Pod {
	f.T.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.NS},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	if ips != nil {
		p.Annotations = map[string]string{nadv1.NetworkStatusAnnot: NetworkStatus(ips...)}
	}
	f.Create(p)
	if phase != "" {
		f.SetPhase(p, phase)
	}
	return p
}

// SetPhase writes a pod's status.phase, as a kubelet would.
func (f *Fixture) SetPhase(p *corev1.Pod, phase corev1.PodPhase) {
	f.T.Helper()
	p.Status.Phase = phase
	if err := f.C.Status().Update(f.Ctx, p); err != nil {
		f.T.Fatalf("setting the phase of pod %s: %v", p.Name, err)
	}
}

// SetNetworkStatus writes a pod's network-status annotation listing ips, as Multus would.
func (f *Fixture) SetNetworkStatus(p *corev1.Pod, ips ...string) {
	f.T.Helper()
	patch := client.MergeFrom(p.DeepCopy())
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[nadv1.NetworkStatusAnnot] = NetworkStatus(ips...)
	if err := f.C.Patch(f.Ctx, p, patch); err != nil {
		f.T.Fatalf("writing the network-status of pod %s: %v", p.Name, err)
	}
}

// DeletePod deletes a pod at once (no kubelet runs to finish a graceful deletion).
func (f *Fixture) DeletePod(p *corev1.Pod) {
	f.T.Helper()
	if err := f.C.Delete(f.Ctx, p, client.GracePeriodSeconds(0)); err != nil {
		f.T.Fatalf("deleting pod %s: %v", p.Name, err)
	}
}

// Reservation creates the reservation of addr in pool for pod (none when nil) on node, as the
// agent makes it.
func (f *Fixture) Reservation(pool, addr string, pod *corev1.Pod, node string) *ipamv1.OverlappingRangeIPReservation {
	f.T.Helper()
	r := NewReservation(pool, addr, pod, node)
	f.Create(r)
	return r
}

// NewReservation is the reservation of addr in pool for pod on node, named as the agent names it.
func NewReservation(pool, addr string, pod *corev1.Pod, node string) *ipamv1.OverlappingRangeIPReservation {
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

// Slice creates block index (cidr) of pool, owned by node.
func (f *Fixture) Slice(pool string, index uint64, cidr, node string) *ipamv1.IPPoolSlice {
	f.T.Helper()
	s := &ipamv1.IPPoolSlice{
		ObjectMeta: metav1.ObjectMeta{Name: ipamv1.SliceName(pool, index)},
		Spec:       ipamv1.IPPoolSliceSpec{Pool: pool, Range: cidr, Node: node},
	}
	f.Create(s)
	return s
}

// NAD creates a NetworkAttachmentDefinition with config.
func (f *Fixture) NAD(name, config string) *nadv1.NetworkAttachmentDefinition {
	f.T.Helper()
	n := &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.NS},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: config},
	}
	f.Create(n)
	return n
}

// EventsFor returns the notes of the Events of type and reason about the object with uid.
func (f *Fixture) EventsFor(uid types.UID, eventType, reason string) []string {
	f.T.Helper()
	var list eventsv1.EventList
	if err := f.C.List(context.Background(), &list); err != nil {
		f.T.Fatalf("listing events: %v", err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.UID == uid && e.Type == eventType && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// NetworkStatus is a network-status annotation listing ips on one attachment.
func NetworkStatus(ips ...string) string {
	data, err := json.Marshal([]nadv1.NetworkStatus{{Name: "default/net1", Interface: "net1", IPs: ips}})
	if err != nil {
		panic(err)
	}
	return string(data)
}

// WantEvent checks that an Event of type and reason about uid has a note with every part.
func (f *Fixture) WantEvent(uid types.UID, eventType, reason string, parts ...string) error {
	f.T.Helper()
	notes := f.EventsFor(uid, eventType, reason)
	for _, n := range notes {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(n, p)
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("no %s Event %s with %q among %q", eventType, reason, parts, notes)
}

// Exists is a check that obj exists (read from the API server).
func (f *Fixture) Exists(obj client.Object) func() error {
	return func() error {
		return f.C.Get(context.Background(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
	}
}

// Gone is a check that obj no longer exists.
func (f *Fixture) Gone(obj client.Object) func() error {
	return func() error {
		err := f.C.Get(context.Background(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("%T %s still exists", obj, client.ObjectKeyFromObject(obj))
	}
}

// Conflist is a NAD config: a macvlan plugin with netpool IPAM (ipam is the section's JSON),
// followed by a tuning plugin, as NADs chain them.
func Conflist(ipam string) string {
	return fmt.Sprintf(`{"cniVersion":"1.0.0","name":"blue","plugins":[
		{"type":"macvlan","master":"eth0","ipam":%s},
		{"type":"tuning","sysctl":{"net.ipv4.conf.IFNAME.arp_notify":"1"}}]}`, ipam)
}

// TestNAD is NAD ns/net with config, not created.
func TestNAD(config string) *nadv1.NetworkAttachmentDefinition {
	return &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "net"},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: config},
	}
}
