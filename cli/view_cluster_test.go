package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/envtest"
)

// The cluster fixture's names: its own namespace, network and ranges, so the tests sharing the
// API server never see each other's objects in what these tests assert.
const (
	ctlNS      = "ctlview"
	ctlNetwork = "ctlview-net"
	ctlPoolA   = "ctlview-a"
	ctlPoolB   = "ctlview-b"
)

type clusterFixture struct {
	env *envtest.Env
	c   client.Client
	// replace turns the API server's UIDs into stable names for golden files.
	replace []string
}

// newClusterFixture creates, as the agent and the controller would, two pools of one network
// (one with slices), a running pod holding an address in each, and a reservation whose pod is
// gone.
func newClusterFixture(t *testing.T) *clusterFixture {
	t.Helper()
	env := envtest.Shared(t)
	f := &clusterFixture{env: env, c: env.Client}
	ctx := context.Background()
	f.create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ctlNS}})
	poolA := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: ctlPoolA}, Spec: ipamv1.IPPoolSpec{
		Range: "10.78.0.0/28", Gateway: "10.78.0.1", Exclude: []string{"10.78.0.8/30"}, NetworkName: ctlNetwork, SliceSize: 30,
	}}
	f.create(t, poolA)
	meta.SetStatusCondition(&poolA.Status.Conditions, metav1.Condition{
		Type: ipamv1.IPPoolReadyCondition, Status: metav1.ConditionTrue, Reason: ipamv1.IPPoolAvailableReason, Message: "addresses are free",
	})
	if err := f.c.Status().Update(ctx, poolA); err != nil {
		t.Fatal(err)
	}
	f.create(t, &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: ctlPoolB}, Spec: ipamv1.IPPoolSpec{
		Range: "fd00:78::/120", NetworkName: ctlNetwork,
	}})
	for i, n := range []string{"node-a", "node-b"} {
		f.create(t, &ipamv1.IPPoolSlice{
			ObjectMeta: metav1.ObjectMeta{Name: ipamv1.SliceName(ctlPoolA, uint64(i))},
			Spec:       ipamv1.IPPoolSliceSpec{Pool: ctlPoolA, Range: fmt.Sprintf("10.78.0.%d/30", 4*i), Node: n},
		})
	}
	zero := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ctlNS, Name: "web-0"},
		Spec: corev1.PodSpec{NodeName: "node-a", TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{Name: "c", Image: "example.invalid/web"}}},
	}
	f.create(t, pod)
	pod.Status.Phase = corev1.PodRunning
	if err := f.c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// A stable UID of the same length, so tables stay aligned.
	f.replace = append(f.replace, string(pod.UID), "00000000-0000-0000-0000-000000web000")
	f.reserve(t, ctlPoolA, "10.78.0.2", "web-0", string(pod.UID), "net1", "node-a")
	f.reserve(t, ctlPoolA, "10.78.0.5", "gone-0", "uid-gone-0", "net1", "node-b")
	f.reserve(t, ctlPoolB, "fd00:78::2", "web-0", string(pod.UID), "net2", "node-a")
	return f
}

// create creates obj and deletes it when the test ends.
func (f *clusterFixture) create(t *testing.T, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	_, isNS := obj.(*corev1.Namespace)
	err := f.c.Create(ctx, obj)
	switch {
	case isNS && (err == nil || apierrors.IsAlreadyExists(err)):
		// envtest runs no namespace controller: a deleted namespace would stay Terminating and
		// refuse the next test's pods, so the namespace is kept.
		return
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.c.Delete(ctx, obj, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: %v", err)
		}
	})
}

// reserve creates the reservation the agent makes for an address (kubestore.newReservation).
func (f *clusterFixture) reserve(t *testing.T, pool, addr, pod, uid, ifName, node string) {
	t.Helper()
	f.create(t, &ipamv1.OverlappingRangeIPReservation{
		ObjectMeta: metav1.ObjectMeta{
			Name:        ipamv1.ReservationName(ctlNetwork, netip.MustParseAddr(addr)),
			Labels:      map[string]string{ipamv1.NodeLabel: ipamv1.LabelValue(node), ipamv1.PoolLabel: ipamv1.LabelValue(pool)},
			Annotations: map[string]string{ipamv1.NetworkAnnotation: "macvlan1"},
		},
		Spec: ipamv1.OverlappingRangeIPReservationSpec{
			Address: addr, Pool: pool, ContainerID: "ctr-" + pod + "-" + ifName, IfName: ifName,
			PodRef: ctlNS + "/" + pod, PodUID: uid, Node: node, NetworkName: ctlNetwork,
		},
	})
}

func (f *clusterFixture) held(t *testing.T, addr string) bool {
	t.Helper()
	var r ipamv1.OverlappingRangeIPReservation
	err := f.c.Get(context.Background(), client.ObjectKey{Name: ipamv1.ReservationName(ctlNetwork, netip.MustParseAddr(addr))}, &r)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func TestClusterViews(t *testing.T) {
	f := newClusterFixture(t)
	kc := []string{"--kubeconfig", f.env.Kubeconfig}
	now := viewClock()
	run := func(t *testing.T, stdin string, args ...string) (string, string, error) {
		t.Helper()
		return runView(t, now, stdin, append(append([]string{}, kc...), args...)...)
	}

	t.Run("golden", func(t *testing.T) {
		for _, tc := range []struct{ name, args string }{
			{"pools", "pools --network " + ctlNetwork},
			{"show", "show " + ctlPoolA},
			{"show-slices", "show " + ctlPoolA + " --slices"},
			{"whois-held", "whois 10.78.0.2"},
			{"whois-free", "whois 10.78.0.6"},
			{"whois-excluded", "whois 10.78.0.9"},
			{"whois-gateway", "whois 10.78.0.1"},
			{"whois-held-v6", "whois fd00:78::2"},
			{"pod", "pod " + ctlNS + "/web-0"},
		} {
			for _, format := range goldenFormats {
				t.Run(tc.name+"/"+format, func(t *testing.T) {
					out, errOut, err := run(t, "", append([]string{"-o", format}, strings.Fields(tc.args)...)...)
					if err != nil {
						t.Fatalf("%v (stderr %q)", err, errOut)
					}
					assertGolden(t, "cluster/"+tc.name+"."+format, normaliseGolden(out, f.replace...))
				})
			}
		}
	})

	t.Run("bad arguments", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"unknown pool", []string{"show", "ctlview-nope"}, `no such pool "ctlview-nope" in the cluster`},
			{"malformed IP", []string{"whois", "10.78.0.2/28"}, `"10.78.0.2/28" is not an IP address`},
			{"IP outside every pool", []string{"whois", "10.79.9.9"}, "10.79.9.9 is outside every pool"},
			{"release outside every pool", []string{"release", "10.79.9.9", "--yes"}, "no allocation of 10.79.9.9 in the cluster: nothing released"},
			{"release of an unknown pod", []string{"release", "--pod", ctlNS + "/nobody", "--yes"}, "no allocation of pod ctlview/nobody"},
			{"bad --request-timeout", []string{"pools", "--request-timeout", "0s"}, "--request-timeout must be positive"},
			{"bad --watch-interval", []string{"pools", "--watch", "--watch-interval", "0s"}, "--watch-interval must be positive"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				out, _, err := runCLI(t, append(append([]string{}, kc...), tc.args...)...)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.want)
				}
				if out != "" {
					t.Fatalf("a failed command printed %q", out)
				}
			})
		}
		for _, a := range []string{"10.78.0.2", "10.78.0.5", "fd00:78::2"} {
			if !f.held(t, a) {
				t.Fatalf("%s was released by a failed command", a)
			}
		}
	})

	t.Run("release refuses a live owner without --force", func(t *testing.T) {
		_, _, err := run(t, "y\n", "release", "10.78.0.2")
		if err == nil || !strings.Contains(err.Error(), "refusing to release, by the GC policy's rules") ||
			!strings.Contains(err.Error(), "pod ctlview/web-0 exists (Running)") {
			t.Fatalf("err = %v", err)
		}
		if !f.held(t, "10.78.0.2") {
			t.Fatal("a refused release released the address")
		}
	})
	t.Run("release of a leak answered n changes nothing", func(t *testing.T) {
		_, errOut, err := run(t, "n\n", "release", "10.78.0.5")
		if err == nil || !strings.Contains(err.Error(), "not confirmed: nothing released") {
			t.Fatalf("err = %v", err)
		}
		if !strings.Contains(errOut, "10.78.0.5 in pool ctlview-a, held by pod ctlview/gone-0") {
			t.Fatalf("the question does not name the allocation: %q", errOut)
		}
		if !f.held(t, "10.78.0.5") {
			t.Fatal("an unconfirmed release released the address")
		}
	})
	t.Run("release of a leak", func(t *testing.T) {
		out, _, err := run(t, "y\n", "release", "10.78.0.5")
		if err != nil {
			t.Fatal(err)
		}
		assertGolden(t, "cluster/release.table", out)
		if f.held(t, "10.78.0.5") || !f.held(t, "10.78.0.2") {
			t.Fatal("release did not release exactly 10.78.0.5")
		}
		for _, format := range goldenFormats[1:] {
			f.reserve(t, ctlPoolA, "10.78.0.5", "gone-0", "uid-gone-0", "net1", "node-b")
			out, _, err := run(t, "", "-o", format, "release", "10.78.0.5", "--yes")
			if err != nil {
				t.Fatal(err)
			}
			assertGolden(t, "cluster/release."+format, normaliseGolden(out, f.replace...))
			if f.held(t, "10.78.0.5") {
				t.Fatalf("-o %s: not released", format)
			}
		}
	})
	t.Run("release --pod --interface --force of a live owner", func(t *testing.T) {
		out, _, err := run(t, "", "-o", "yaml", "release", "--pod", ctlNS+"/web-0", "--interface", "net2", "--force", "--yes")
		if err != nil {
			t.Fatal(err)
		}
		assertGolden(t, "cluster/release-pod.yaml", normaliseGolden(out, f.replace...))
		if f.held(t, "fd00:78::2") || !f.held(t, "10.78.0.2") {
			t.Fatal("release did not release exactly the pod's net2 address")
		}
	})
}

// TestClusterUnreachable: a cluster that does not answer is a clear error within the request
// timeout, for every command.
func TestClusterUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "https://` + addr + `", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: gone, context: {cluster: gone, user: u}}]
current-context: gone
`
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"pools"}, {"show", ctlPoolA}, {"whois", "10.78.0.2"}, {"release", "10.78.0.2", "--force", "--yes"},
	} {
		t.Run(args[0], func(t *testing.T) {
			out, _, err := runView(t, viewClock(), "", append([]string{"--kubeconfig", kubeconfig, "--request-timeout", "2s"}, args...)...)
			if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "failed to list") {
				t.Fatalf("err = %v, want a failed list naming %s", err, addr)
			}
			if out != "" {
				t.Fatalf("printed %q", out)
			}
		})
	}
	t.Run("missing kubeconfig", func(t *testing.T) {
		_, _, err := runView(t, viewClock(), "", "--kubeconfig", filepath.Join(t.TempDir(), "none"), "pools")
		if err == nil || !strings.Contains(err.Error(), "failed to load the cluster's client config") {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestClusterNotServing: a pool that hands out nothing now says why, by the agent's own rules:
// an inline pool overlapping an operator's pool of its network yields to it (before the
// controller has judged), and a pool the controller found invalid is not Ready. whois says a
// free address of such a pool is not handed out.
func TestClusterNotServing(t *testing.T) {
	f := &clusterFixture{env: envtest.Shared(t)}
	f.c = f.env.Client
	ctx := context.Background()
	const network = "ctlview-ovl"
	f.create(t, &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "ctlview-ovl-operator"}, Spec: ipamv1.IPPoolSpec{
		Range: "10.79.1.0/28", NetworkName: network,
	}})
	f.create(t, &ipamv1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: "ctlview-ovl-inline", Labels: map[string]string{ipamv1.DerivedLabel: ipamv1.DerivedLabelValue}},
		Spec:       ipamv1.IPPoolSpec{Range: "10.79.1.0/29", NetworkName: network},
	})
	invalid := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "ctlview-ovl-invalid"}, Spec: ipamv1.IPPoolSpec{
		Range: "10.79.2.0/28", NetworkName: network,
	}}
	f.create(t, invalid)
	meta.SetStatusCondition(&invalid.Status.Conditions, metav1.Condition{
		Type: ipamv1.IPPoolReadyCondition, Status: metav1.ConditionFalse, Reason: ipamv1.IPPoolInvalidSpecReason, Message: "planted by the test",
	})
	if err := f.c.Status().Update(ctx, invalid); err != nil {
		t.Fatal(err)
	}
	kc := "--kubeconfig=" + f.env.Kubeconfig
	out, _, err := runView(t, viewClock(), "", kc, "pools", "--network", network, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc poolList
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ctlview-ovl-inline":   "overlaps IPPool ctlview-ovl-operator (10.79.1.1-10.79.1.14, an operator's pool)",
		"ctlview-ovl-invalid":  "is not Ready (InvalidSpec): planted by the test",
		"ctlview-ovl-operator": "",
	}
	if len(doc.Items) != len(want) {
		t.Fatalf("pools: %s", out)
	}
	for _, p := range doc.Items {
		if w := want[p.Name]; (w == "") != (p.NotServing == "") || !strings.Contains(p.NotServing, w) {
			t.Errorf("%s: notServing %q, want %q", p.Name, p.NotServing, w)
		}
	}
	out, _, err = runView(t, viewClock(), "", kc, "whois", "10.79.1.3")
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]bool{}
	for _, l := range strings.Split(out, "\n")[1:] {
		if fields := strings.Fields(l); len(fields) > 2 && fields[2] == "Free" {
			refused[fields[1]] = strings.Contains(l, "hands out nothing now")
		}
	}
	if r, ok := refused["ctlview-ovl-inline"]; !ok || !r {
		t.Fatalf("whois does not say the inline pool hands out nothing:\n%s", out)
	}
	if r, ok := refused["ctlview-ovl-operator"]; !ok || r {
		t.Fatalf("whois does not say the operator's pool serves:\n%s", out)
	}
}
