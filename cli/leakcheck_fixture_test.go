package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/ippool"
	"github.com/netpool/netpool/test/envtest"
)

// lcEnv is the shared API server with helpers for the leaks and check tests: every object they
// create is deleted when the test ends.
type lcEnv struct {
	t   *testing.T
	ctx context.Context
	env *envtest.Env
	c   client.Client
}

func newLCEnv(t *testing.T) *lcEnv {
	env := envtest.Shared(t)
	return &lcEnv{t: t, ctx: context.Background(), env: env, c: env.Client}
}

func (e *lcEnv) create(obj client.Object) {
	e.t.Helper()
	if err := e.c.Create(e.ctx, obj); err != nil {
		e.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
	e.t.Cleanup(func() { _ = e.c.Delete(context.Background(), obj) })
}

func (e *lcEnv) namespace(name string) {
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

func (e *lcEnv) node(name string) {
	e.create(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

func (e *lcEnv) pool(name string, spec ipamv1.IPPoolSpec) *ipamv1.IPPool {
	p := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	e.create(p)
	return p
}

// setStatusCounts writes a pool's counts as the controller would.
func (e *lcEnv) setStatusCounts(p *ipamv1.IPPool, capacity string, allocated int64, free string) {
	e.t.Helper()
	p.Status.Capacity, p.Status.Allocated, p.Status.Free = capacity, &allocated, free
	if err := e.c.Status().Update(e.ctx, p); err != nil {
		e.t.Fatalf("writing the status of IPPool %s: %v", p.Name, err)
	}
}

// reservation creates the reservation of addr in pool p for pod ns/name (uid), named and labelled
// as allocator/kubestore names them; name overrides the derived name when set.
func (e *lcEnv) reservation(p *ipamv1.IPPool, addr, podRef, uid, node, name string) *ipamv1.OverlappingRangeIPReservation {
	e.t.Helper()
	return e.reservationNamed(p, addr, podRef, uid, node, name, nil)
}

// reservationWith is reservation with the object changed by set before it is created.
func (e *lcEnv) reservationWith(p *ipamv1.IPPool, addr, podRef, uid, node string, set func(*ipamv1.OverlappingRangeIPReservation)) *ipamv1.OverlappingRangeIPReservation {
	e.t.Helper()
	return e.reservationNamed(p, addr, podRef, uid, node, "", set)
}

func (e *lcEnv) reservationNamed(p *ipamv1.IPPool, addr, podRef, uid, node, name string, set func(*ipamv1.OverlappingRangeIPReservation)) *ipamv1.OverlappingRangeIPReservation {
	e.t.Helper()
	a := netip.MustParseAddr(addr)
	if name == "" {
		name = ipamv1.ReservationName(ippool.ReservationScope(p.Name, p.Spec.NetworkName, ippool.Overlapping(p)), a)
	}
	r := &ipamv1.OverlappingRangeIPReservation{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{ipamv1.NodeLabel: ipamv1.LabelValue(node), ipamv1.PoolLabel: ipamv1.LabelValue(p.Name)},
			Annotations: map[string]string{ipamv1.NetworkAnnotation: p.Spec.NetworkName},
		},
		Spec: ipamv1.OverlappingRangeIPReservationSpec{
			Address: a.String(), Pool: p.Name, ContainerID: "ctr-" + strings.ReplaceAll(a.String(), ".", "-"), IfName: "net1",
			PodRef: podRef, PodUID: uid, Node: node, NetworkName: p.Spec.NetworkName,
		},
	}
	if set != nil {
		set(r)
	}
	e.create(r)
	return r
}

// pod creates a pod; phase, when set, and the network-status listing ips (raw when it is not
// nil) are written as a kubelet and Multus would.
func (e *lcEnv) pod(ns, name string, phase corev1.PodPhase, status *string, ips ...string) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	switch {
	case status != nil:
		p.Annotations = map[string]string{nadv1.NetworkStatusAnnot: *status}
	case ips != nil:
		data, err := json.Marshal([]nadv1.NetworkStatus{{Name: ns + "/net", Interface: "net1", IPs: ips}})
		if err != nil {
			e.t.Fatal(err)
		}
		p.Annotations = map[string]string{nadv1.NetworkStatusAnnot: string(data)}
	}
	e.create(p)
	if phase != "" {
		p.Status.Phase = phase
		if err := e.c.Status().Update(e.ctx, p); err != nil {
			e.t.Fatalf("setting the phase of pod %s: %v", name, err)
		}
	}
	return p
}

// snapshot is every reservation, for asserting that a command changed none.
func (e *lcEnv) snapshot() []byte {
	e.t.Helper()
	var list ipamv1.OverlappingRangeIPReservationList
	if err := e.c.List(e.ctx, &list); err != nil {
		e.t.Fatal(err)
	}
	var b bytes.Buffer
	for _, r := range list.Items {
		b.WriteString(r.Name + "@" + r.ResourceVersion + "\n")
	}
	return b.Bytes()
}

// runCLIAt is runCLI with the clock at now.
func runCLIAt(t *testing.T, now time.Time, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRoot(&out, &errOut, func() time.Time { return now })
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), errOut.String(), err
}

// lcNormaliser replaces what the API server chooses (UIDs, creation times) with placeholders of
// the same width, so goldens are stable and tables keep their alignment.
type lcNormaliser struct{ pairs []string }

func (n *lcNormaliser) uid(uid, label string) {
	n.pairs = append(n.pairs, uid, padTo(label, len(uid)))
}

var rfc3339 = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)

func (n *lcNormaliser) apply(s string) string {
	s = strings.NewReplacer(n.pairs...).Replace(s)
	return rfc3339.ReplaceAllString(s, "2030-01-01T00:00:00Z")
}

func padTo(s string, n int) string {
	if len(s) >= n {
		return s[:n]
	}
	return s + strings.Repeat("x", n-len(s))
}

// latestCreation is the newest creation time of rs; the tests put the clock an hour after it so
// every age prints as "60m".
func latestCreation(rs ...*ipamv1.OverlappingRangeIPReservation) time.Time {
	var t time.Time
	for _, r := range rs {
		if r.CreationTimestamp.After(t) {
			t = r.CreationTimestamp.Time
		}
	}
	return t
}

// lcUnreachableKubeconfig writes a kubeconfig for a server on 127.0.0.1 that is either a closed
// port (connection refused) or, with silent, a listener that accepts and never answers, so only
// --request-timeout ends the call.
func lcUnreachableKubeconfig(t *testing.T, silent bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if silent {
		t.Cleanup(func() { _ = l.Close() })
	} else if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://" + addr +
		"\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
