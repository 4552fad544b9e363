package migrate

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/kubeclient/crclient"
	"github.com/netpool/netpool/internal/scheme"
)

func nadOf(ns, name, config string) nadv1.NetworkAttachmentDefinition {
	return nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: config}}
}

func podOn(ns, name, node, status string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: "uid-" + "name"}, Spec: corev1.PodSpec{NodeName: node}}
	if status != "" {
		p.Annotations = map[string]string{nadv1.NetworkStatusAnnot: status}
	}
	return p
}

func planOf(t *testing.T, s *state, objs ...client.Object) *Report {
	t.Helper()
	return scopedPlanOf(t, s, false, objs...)
}

func scopedPlanOf(t *testing.T, s *state, scoped bool, objs ...client.Object) *Report {
	t.Helper()
	kinds, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(kinds).WithObjects(objs...).Build()
	p, err := newPlan(context.Background(), crclient.Reader(c), s, scoped, DefaultAgentDirs())
	if err != nil {
		t.Fatal(err)
	}
	p.report.count()
	return p.report
}

// TestPlanNetworkOfSharedPool: two NADs of different CNI names share one pool; each allocation is
// recorded under the network Multus' network-status names for its interface, and one it names for
// neither is invalid, since the wrong network would let another network's GC release it.
func TestPlanNetworkOfSharedPool(t *testing.T) {
	ipamPart := `"ipam":{"type":"whereabouts","range":"10.9.0.0/24","network_name":"shared","kubernetes":{"kubeconfig":"/k"}}}`
	s := &state{
		nads: []nadv1.NetworkAttachmentDefinition{
			nadOf("a", "red", `{"cniVersion":"1.0.0","name":"red","type":"macvlan",`+ipamPart),
			nadOf("b", "blue", `{"cniVersion":"1.0.0","name":"blue","type":"macvlan",`+ipamPart),
		},
		pools: []*wbPool{{Namespace: "kube-system", Name: "shared-10.9.0.0-24", Range: netip.MustParsePrefix("10.9.0.0/24"),
			Allocations: []wbAllocation{
				{Key: "1", Addr: netip.MustParseAddr("10.9.0.1"), ContainerID: "c1", PodRef: "a/p1", IfName: "net1"},
				{Key: "2", Addr: netip.MustParseAddr("10.9.0.2"), ContainerID: "c2", PodRef: "b/p2", IfName: "net2"},
				{Key: "3", Addr: netip.MustParseAddr("10.9.0.3"), ContainerID: "c3", PodRef: "b/p3", IfName: "net1"},
				{Key: "0", Addr: netip.MustParseAddr("10.9.0.0"), ContainerID: "c0", PodRef: "b/p3", IfName: "net9"},
			}}},
	}
	r := planOf(t, s,
		podOn("a", "p1", "n1", `[{"name":"a/red","interface":"net1"}]`),
		podOn("b", "p2", "n2", `[{"name":"a/red","interface":"net1"},{"name":"b/blue","interface":"net2"}]`),
		podOn("b", "p3", "n2", `not json`))
	if len(r.Pools) != 1 || r.Pools[0].Name != "shared-10.9.0.0-24" || r.Pools[0].Action != ActionCreate {
		t.Fatalf("pools %+v", r.Pools)
	}
	want := map[string]struct {
		action  Action
		network string
		reason  string
	}{
		"10.9.0.1": {ActionCreate, "red", ""},
		"10.9.0.2": {ActionCreate, "blue", ""},
		"10.9.0.3": {ActionInvalid, "", `share IPPool shared-10.9.0.0-24, and the pod's k8s.v1.cni.cncf.io/network-status annotation does not say which attached net1`},
		"10.9.0.0": {ActionSkipped, "", "network or broadcast address"},
	}
	for _, a := range r.Allocations {
		w := want[a.Address]
		if a.Action != w.action || a.Network != w.network || !strings.Contains(a.Reason, w.reason) {
			t.Errorf("%s: %s %q %q; want %s %q containing %q", a.Address, a.Action, a.Network, a.Reason, w.action, w.network, w.reason)
		}
	}
	if r.NADs[0].Kept != 2 || r.NADs[1].Kept != 2 || !r.Blocked() {
		t.Fatalf("nads %+v, blocked %t", r.NADs, r.Blocked())
	}
}

// TestPlanExistingPools: an existing pool of the name with another range is a conflict, and its
// addresses are not planned; one recording overlapping ranges off names reservations by the pool.
func TestPlanExistingPools(t *testing.T) {
	s := &state{
		nads: []nadv1.NetworkAttachmentDefinition{
			nadOf("a", "x", `{"name":"x","ipam":{"type":"whereabouts","range":"10.8.0.0/24","network_name":"x","kubernetes":{"kubeconfig":"/k"}}}`),
			nadOf("a", "y", `{"name":"y","ipam":{"type":"whereabouts","range":"10.7.0.0/24","network_name":"y","enable_overlapping_ranges":false,"kubernetes":{"kubeconfig":"/k"}}}`),
		},
		pools: []*wbPool{
			{Namespace: "kube-system", Name: "x-10.8.0.0-24", Range: netip.MustParsePrefix("10.8.0.0/24"),
				Allocations: []wbAllocation{{Key: "1", Addr: netip.MustParseAddr("10.8.0.1"), ContainerID: "c1", PodRef: "a/p", IfName: "net1"}}},
			{Namespace: "kube-system", Name: "y-10.7.0.0-24", Range: netip.MustParsePrefix("10.7.0.0/24"),
				Allocations: []wbAllocation{{Key: "1", Addr: netip.MustParseAddr("10.7.0.1"), ContainerID: "c1", PodRef: "a/p", IfName: "net2"}}},
		},
	}
	squat := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "x-10.8.0.0-24"}, Spec: ipamv1.IPPoolSpec{Range: "10.8.0.0/16", NetworkName: "x"}}
	r := planOf(t, s, squat, podOn("a", "p", "n1", ""))
	if len(r.Pools) != 2 || r.Pools[0].Action != ActionConflict || !strings.Contains(r.Pools[0].Reason, "already exists for range 10.8.0.0/16") ||
		r.Pools[1].Action != ActionCreate {
		t.Fatalf("pools %+v", r.Pools)
	}
	if len(r.Allocations) != 1 || r.Allocations[0].Reservation != "y-10.7.0.0-24.10.7.0.1" || r.Allocations[0].Node != "n1" {
		t.Fatalf("allocations %+v", r.Allocations)
	}
}

// TestPlanFindings: a whereabouts pool no NAD uses and a reservation no allocation explains are
// reported; a pool in two namespaces is invalid.
func TestPlanFindings(t *testing.T) {
	r24 := netip.MustParsePrefix("10.6.0.0/24")
	alloc := []wbAllocation{{Key: "1", Addr: netip.MustParseAddr("10.6.0.1"), ContainerID: "c", PodRef: "a/p", IfName: "net1"}}
	s := &state{
		nads: []nadv1.NetworkAttachmentDefinition{
			nadOf("a", "z", `{"name":"z","ipam":{"type":"whereabouts","range":"10.6.0.0/24","network_name":"z","kubernetes":{"kubeconfig":"/k"}}}`),
			nadOf("a", "broken", `{"name":"b","ipam":{"type":"whereabouts","range":"10.5.0.0/40"}}`),
			nadOf("a", "other", `{"name":"o","ipam":{"type":"host-local"`),
		},
		pools: []*wbPool{
			{Namespace: "kube-system", Name: "z-10.6.0.0-24", Range: r24, Allocations: alloc},
			{Namespace: "wb", Name: "z-10.6.0.0-24", Range: r24, Allocations: alloc},
			{Namespace: "kube-system", Name: "old-10.4.0.0-24", Range: netip.MustParsePrefix("10.4.0.0/24"), Allocations: alloc},
		},
		reservations: []wbReservation{{Namespace: "kube-system", Name: "z-10.6.0.9", PodRef: "a/q"}},
	}
	r := planOf(t, s)
	if len(r.NADs) != 2 || r.NADs[0].Name != "broken" || r.NADs[0].Error == "" || r.NADs[1].Name != "z" {
		t.Fatalf("nads %+v (a broken config without whereabouts is not listed)", r.NADs)
	}
	if len(r.Pools) != 1 || r.Pools[0].Action != ActionInvalid || !strings.Contains(r.Pools[0].Reason, "exists in namespaces kube-system, wb") || len(r.Allocations) != 0 {
		t.Fatalf("pools %+v allocations %+v", r.Pools, r.Allocations)
	}
	if len(r.Findings) != 2 || !strings.HasSuffix(r.Findings[0].Object, "kube-system/old-10.4.0.0-24") ||
		!strings.HasSuffix(r.Findings[1].Object, "kube-system/z-10.6.0.9") {
		t.Fatalf("findings %+v", r.Findings)
	}
	if r.Summary != (Summary{Skipped: 2, Invalid: 2}) {
		t.Fatalf("summary %+v", r.Summary)
	}
}

// TestPlanLeaks: an allocation whose pod the controller's GC policy would release at once is a
// whereabouts leak and is skipped; a pending pod's is imported.
func TestPlanLeaks(t *testing.T) {
	at := func(key, pod string) wbAllocation {
		return wbAllocation{Key: key, Addr: netip.MustParseAddr("10.3.0." + key), ContainerID: "c" + key, PodRef: "a/" + pod, IfName: "net1"}
	}
	s := &state{
		nads: []nadv1.NetworkAttachmentDefinition{nadOf("a", "l", `{"name":"l","ipam":{"type":"whereabouts","range":"10.3.0.0/24","kubernetes":{"kubeconfig":"/k"}}}`)},
		pools: []*wbPool{{Namespace: "kube-system", Name: "10.3.0.0-24", Range: netip.MustParsePrefix("10.3.0.0/24"),
			Allocations: []wbAllocation{at("1", "done"), at("2", "moved"), at("3", "pending"), at("4", "gone"), at("5", "nowhere")}}},
	}
	done := podOn("a", "done", "n1", "")
	done.Status.Phase = corev1.PodSucceeded
	moved := podOn("a", "moved", "n1", `[{"name":"a/l","interface":"net1","ips":["10.3.0.99"]}]`)
	moved.Status.Phase = corev1.PodRunning
	r := planOf(t, s, done, moved, podOn("a", "pending", "n1", ""), podOn("a", "nowhere", "", ""))
	want := []struct {
		action Action
		reason string
	}{
		{ActionSkipped, "(PodFinished: pod a/done has Succeeded)"},
		{ActionSkipped, "(NotInNetworkStatus: pod a/moved is running and its network-status does not list 10.3.0.2)"},
		{ActionCreate, ""},
		{ActionSkipped, "(PodDeleted: pod a/gone no longer exists)"},
		{ActionSkipped, "pod a/nowhere is on no node"},
	}
	if len(r.Allocations) != len(want) {
		t.Fatalf("allocations %+v", r.Allocations)
	}
	for i, w := range want {
		if a := r.Allocations[i]; a.Action != w.action || !strings.Contains(a.Reason, w.reason) {
			t.Errorf("%s: %s %q, want %s %q", a.Address, a.Action, a.Reason, w.action, w.reason)
		}
	}
}

// TestPlanUnreadablePool: a whereabouts IPPool whose range cannot be read makes its NAD's pool
// invalid; one that no NAD uses is a finding.
func TestPlanUnreadablePool(t *testing.T) {
	s := &state{
		nads: []nadv1.NetworkAttachmentDefinition{nadOf("a", "q", `{"name":"q","ipam":{"type":"whereabouts","range":"10.2.0.0/24","network_name":"q","kubernetes":{"kubeconfig":"/k"}}}`)},
		unreadable: []unreadablePool{
			{"kube-system", "q-10.2.0.0-24", `whereabouts IPPool kube-system/q-10.2.0.0-24: spec.range "x" is not a CIDR`},
			{"kube-system", "other", `whereabouts IPPool kube-system/other: spec.range "" is not a CIDR`},
		},
	}
	r := planOf(t, s)
	if len(r.Pools) != 1 || r.Pools[0].Action != ActionInvalid || !strings.Contains(r.Pools[0].Reason, `spec.range "x"`) {
		t.Fatalf("pools %+v", r.Pools)
	}
	if len(r.Findings) != 1 || !strings.HasSuffix(r.Findings[0].Object, "kube-system/other") || !r.Blocked() {
		t.Fatalf("findings %+v", r.Findings)
	}
}

// TestPlanWhereaboutsDisagrees: an allocation whose whereabouts reservation names another pod is
// invalid; one whose reservation agrees is imported.
func TestPlanWhereaboutsDisagrees(t *testing.T) {
	s := &state{
		nads: []nadv1.NetworkAttachmentDefinition{nadOf("a", "d", `{"name":"d","ipam":{"type":"whereabouts","range":"10.1.0.0/24","network_name":"d","kubernetes":{"kubeconfig":"/k"}}}`)},
		pools: []*wbPool{{Namespace: "kube-system", Name: "d-10.1.0.0-24", Range: netip.MustParsePrefix("10.1.0.0/24"), Allocations: []wbAllocation{
			{Key: "1", Addr: netip.MustParseAddr("10.1.0.1"), ContainerID: "c1", PodRef: "a/p", IfName: "net1"},
			{Key: "2", Addr: netip.MustParseAddr("10.1.0.2"), ContainerID: "c2", PodRef: "a/p", IfName: "net2"},
		}}},
		reservations: []wbReservation{
			{Namespace: "kube-system", Name: "d-10.1.0.1", PodRef: "a/p"},
			{Namespace: "kube-system", Name: "d-10.1.0.2", PodRef: "a/other"},
		},
	}
	r := planOf(t, s, podOn("a", "p", "n1", ""))
	if len(r.Allocations) != 2 || r.Allocations[0].Action != ActionCreate || r.Allocations[1].Action != ActionInvalid ||
		!strings.Contains(r.Allocations[1].Reason, "OverlappingRangeIPReservation kube-system/d-10.1.0.2 names pod a/other, its IPPool allocation pod a/p") ||
		len(r.Findings) != 0 {
		t.Fatalf("allocations %+v findings %+v", r.Allocations, r.Findings)
	}
}

// TestPlanScoped: with a namespace, only whereabouts objects of that namespace's networks are
// reported.
func TestPlanScoped(t *testing.T) {
	alloc := []wbAllocation{{Key: "1", Addr: netip.MustParseAddr("10.6.0.1"), ContainerID: "c", PodRef: "b/p", IfName: "net1"}}
	s := &state{
		nads: []nadv1.NetworkAttachmentDefinition{nadOf("a", "s", `{"name":"s","ipam":{"type":"whereabouts","range":"10.2.0.0/24","network_name":"mine","kubernetes":{"kubeconfig":"/k"}}}`)},
		pools: []*wbPool{
			{Namespace: "kube-system", Name: "mine-10.6.0.0-24", Range: netip.MustParsePrefix("10.6.0.0/24"), Allocations: alloc},
			{Namespace: "kube-system", Name: "theirs-10.6.0.0-24", Range: netip.MustParsePrefix("10.6.0.0/24"), Allocations: alloc},
		},
		reservations: []wbReservation{{Namespace: "kube-system", Name: "mine-10.2.0.9"}, {Namespace: "kube-system", Name: "10.2.0.9"}},
	}
	r := scopedPlanOf(t, s, true)
	if len(r.Findings) != 2 || !strings.HasSuffix(r.Findings[0].Object, "/mine-10.6.0.0-24") || !strings.HasSuffix(r.Findings[1].Object, "/mine-10.2.0.9") {
		t.Fatalf("findings %+v", r.Findings)
	}
	if r := planOf(t, s); len(r.Findings) != 4 {
		t.Fatalf("unscoped findings %+v", r.Findings)
	}
}

// TestPlanSameAddressTwice: two whereabouts pools of one network that gave one address to two
// pods (whereabouts' overlapping-range lock was off or lost) cannot both be imported under the
// network's one reservation name: the second is a conflict.
func TestPlanSameAddressTwice(t *testing.T) {
	s := &state{
		nads: []nadv1.NetworkAttachmentDefinition{
			nadOf("a", "wide", `{"name":"n","ipam":{"type":"whereabouts","range":"10.1.0.0/24","network_name":"n","kubernetes":{"kubeconfig":"/k"}}}`),
			nadOf("a", "narrow", `{"name":"n","ipam":{"type":"whereabouts","range":"10.1.0.0/25","network_name":"n","kubernetes":{"kubeconfig":"/k"}}}`),
		},
		pools: []*wbPool{
			{Namespace: "kube-system", Name: "n-10.1.0.0-24", Range: netip.MustParsePrefix("10.1.0.0/24"),
				Allocations: []wbAllocation{{Key: "5", Addr: netip.MustParseAddr("10.1.0.5"), ContainerID: "c1", PodRef: "a/p1", IfName: "net1"}}},
			{Namespace: "kube-system", Name: "n-10.1.0.0-25", Range: netip.MustParsePrefix("10.1.0.0/25"),
				Allocations: []wbAllocation{{Key: "5", Addr: netip.MustParseAddr("10.1.0.5"), ContainerID: "c2", PodRef: "a/p2", IfName: "net1"}}},
		},
	}
	r := planOf(t, s, podOn("a", "p1", "n1", ""), podOn("a", "p2", "n2", ""))
	if len(r.Allocations) != 2 || r.Allocations[0].Action != ActionCreate || r.Allocations[1].Action != ActionConflict ||
		!strings.Contains(r.Allocations[1].Reason, "whereabouts also gave the address to a/p1 (kube-system/n-10.1.0.0-24[5])") {
		t.Fatalf("allocations %+v", r.Allocations)
	}
}
