package gcpolicy

import (
	"strings"
	"testing"
	"time"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/kubeclient/crclient"
	"github.com/netpool/netpool/internal/podowner"
	"github.com/netpool/netpool/internal/scheme"
)

func policyScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The objects of the tests below: StatefulSet apps/db (ordinal 1's address, pool p) and IPAMClaim
// vms/vm-a.anet, with their pods.
var (
	policyNow   = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	policyGrace = time.Minute
)

func stsPod(name, uid, node string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID(uid),
			Labels:          map[string]string{podowner.PodIndexLabel: strings.TrimPrefix(name, "db-")},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Controller: ptr.To(true)}}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func stsReservation(name, addr string, created time.Time, users ...ipamv1.ReservationUser) *ipamv1.OverlappingRangeIPReservation {
	o := ipamv1.ReservationOwner{Kind: ipamv1.OwnerStatefulSet, Namespace: "apps", Name: "db", Ordinal: ptr.To[int32](1), Interface: "net1"}
	r := &ipamv1.OverlappingRangeIPReservation{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{
			ipamv1.OwnerLabel: ipamv1.OwnerLabelValue(o.Key()), ipamv1.PoolLabel: ipamv1.LabelValue("p")}},
		Spec: ipamv1.OverlappingRangeIPReservationSpec{Address: addr, Pool: "p", Owner: &o, Users: users},
	}
	if len(users) > 0 {
		r.Spec.ContainerID, r.Spec.IfName, r.Spec.PodRef, r.Spec.PodUID = users[0].ContainerID, users[0].IfName, users[0].PodRef, users[0].PodUID
	}
	return r
}

func user(id, pod, uid, node string) ipamv1.ReservationUser {
	return ipamv1.ReservationUser{ContainerID: id, IfName: "net1", PodRef: pod, PodUID: uid, Node: node}
}

// TestScaledDownOwnerWaitsForItsPods: a StatefulSet scaled below an ordinal (or deleted) releases
// the ordinal's address only once no pod is bound to it: the pods terminate after the scale-down,
// and a new pod must not get the address of one still running.
func TestScaledDownOwnerWaitsForItsPods(t *testing.T) {
	old := policyNow.Add(-2 * policyGrace)
	scaled := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1)}}
	bound := user("ctr-1", "apps/db-1", "u1", "node-a")
	for _, tt := range []struct {
		name       string
		sts        bool
		pod        *corev1.Pod
		users      []ipamv1.ReservationUser
		wantReason string
		wantBound  string
	}{
		{name: "scaled down, the pod still runs", sts: true, pod: stsPod("db-1", "u1", "node-a", corev1.PodRunning), users: []ipamv1.ReservationUser{bound},
			wantBound: "StatefulSet apps/db has 1 replicas, so ordinal 1 is gone, but pod apps/db-1 on node node-a still bound to 10.0.0.5"},
		{name: "scaled down, the pod terminating", sts: true, pod: func() *corev1.Pod {
			p := stsPod("db-1", "u1", "node-a", corev1.PodRunning)
			p.DeletionTimestamp, p.Finalizers = ptr.To(metav1.NewTime(policyNow)), []string{"test"}
			return p
		}(), users: []ipamv1.ReservationUser{bound}, wantBound: "pod apps/db-1 on node node-a still bound"},
		{name: "StatefulSet deleted, the pod still runs", pod: stsPod("db-1", "u1", "node-a", corev1.PodRunning), users: []ipamv1.ReservationUser{bound},
			wantBound: "StatefulSet apps/db no longer exists, but pod apps/db-1 on node node-a still bound"},
		{name: "scaled down, the pod's DEL unbound it", sts: true, pod: stsPod("db-1", "u1", "node-a", corev1.PodRunning), wantReason: ReasonOwnerScaledDown},
		{name: "scaled down, the pod gone", sts: true, users: []ipamv1.ReservationUser{bound}, wantReason: ReasonOwnerScaledDown},
		{name: "scaled down, the pod finished", sts: true, pod: stsPod("db-1", "u1", "node-a", corev1.PodSucceeded), users: []ipamv1.ReservationUser{bound},
			wantReason: ReasonOwnerScaledDown},
		{name: "StatefulSet deleted, a pod of another UID", pod: stsPod("db-1", "u9", "node-a", corev1.PodRunning), users: []ipamv1.ReservationUser{bound},
			wantReason: ReasonOwnerDeleted},
		{name: "a user that names no pod stays bound", sts: true, users: []ipamv1.ReservationUser{{ContainerID: "c", IfName: "net1", Node: "node-a"}},
			wantBound: "container c on node node-a still bound"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(policyScheme(t))
			if tt.sts {
				b = b.WithObjects(scaled.DeepCopy())
			}
			if tt.pod != nil {
				b = b.WithObjects(tt.pod)
			}
			r := stsReservation("r", "10.0.0.5", old, tt.users...)
			f, err := Read(t.Context(), crclient.Reader(b.Build()), r)
			if err != nil {
				t.Fatal(err)
			}
			v := Judge(r, f, policyNow, policyGrace)
			if v.Reason != tt.wantReason || !strings.Contains(v.Bound, tt.wantBound) || (tt.wantBound == "") != (v.Bound == "") {
				t.Fatalf("verdict %+v, want reason %q bound %q", v, tt.wantReason, tt.wantBound)
			}
		})
	}
}

// TestStaleUsers: the users whose pods are gone are the controller's to remove, with why.
func TestStaleUsers(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(policyScheme(t)).WithObjects(
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)}},
		stsPod("db-1", "u2", "node-b", corev1.PodRunning)).Build()
	r := stsReservation("r", "10.0.0.5", policyNow.Add(-2*policyGrace),
		user("src", "apps/db-1", "u1", "node-a"),                                    // the pod of the name now has another UID
		user("dst", "apps/db-1", "u2", "node-b"),                                    // the running pod
		user("gone", "apps/db-7", "u7", "node-c"),                                   // no such pod
		ipamv1.ReservationUser{ContainerID: "anon", IfName: "net1", Node: "node-d"}) // no pod named: kept
	f, err := Read(t.Context(), crclient.Reader(c), r)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range StaleUsers(r, f) {
		got = append(got, s.User.ContainerID+": "+s.Why)
	}
	want := []string{"src: pod apps/db-1 now has UID u2, not u1", "gone: pod apps/db-7 no longer exists"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("stale users %q, want %q", got, want)
	}
	if v := Judge(r, f, policyNow, policyGrace); v.Reason != "" {
		t.Fatalf("a reservation of a live owner with a bound pod: %+v, want it kept", v)
	}
	w := fake.NewClientBuilder().WithScheme(policyScheme(t)).WithObjects(r.DeepCopy()).Build()
	pruned := &ipamv1.OverlappingRangeIPReservation{}
	if err := w.Get(t.Context(), client.ObjectKeyFromObject(r), pruned); err != nil {
		t.Fatal(err)
	}
	if ok, err := Prune(t.Context(), crclient.Writer(w), pruned, StaleUsers(r, f)); err != nil || !ok {
		t.Fatalf("Prune = %v, %v", ok, err)
	}
	stale := r.DeepCopy() // as read before the first Prune
	stale.ResourceVersion = "1"
	if ok, err := Prune(t.Context(), crclient.Writer(w), stale, StaleUsers(r, f)[:1]); err != nil || ok {
		t.Fatalf("Prune of a copy that changed since = %v, %v; want false, no error", ok, err)
	}
	if len(pruned.Spec.Users) != 2 || pruned.Spec.ContainerID != "anon" {
		t.Fatalf("after Prune: %+v, want dst and anon, anon holding it", pruned.Spec)
	}
}

// TestSuperseded: an address no pod is bound to, of an owner that exists, goes when the owner's
// own pod is bound to another of its addresses in the pool, on the node it runs on. A sibling a
// node made up (a user of its own node for a pod that runs elsewhere, a pod that is not the
// owner's, a sibling of another pool or owner) frees nothing.
func TestSuperseded(t *testing.T) {
	old, newer := policyNow.Add(-3*policyGrace), policyNow.Add(-2*policyGrace)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)}}
	idle := stsReservation("idle", "10.0.0.5", old)
	imposter := stsPod("imposter", "ui", "node-b", corev1.PodRunning)
	imposter.Labels[podowner.PodIndexLabel] = "1"
	otherPool := stsReservation("other-pool", "10.0.1.9", newer, user("dst", "apps/db-1", "u1", "node-a"))
	otherPool.Spec.Pool = "q"
	for _, tt := range []struct {
		name    string
		sibling *ipamv1.OverlappingRangeIPReservation
		pods    []client.Object
		want    string
	}{
		{name: "the ordinal's pod bound to the requested address", sibling: stsReservation("req", "10.0.0.9", newer, user("dst", "apps/db-1", "u1", "node-a")),
			pods: []client.Object{stsPod("db-1", "u1", "node-a", corev1.PodRunning)}, want: ReasonSuperseded},
		{name: "a user on another node than its pod", sibling: stsReservation("req", "10.0.0.9", newer, user("dst", "apps/db-1", "u1", "node-b")),
			pods: []client.Object{stsPod("db-1", "u1", "node-a", corev1.PodRunning)}},
		{name: "a user of a pod that is not the ordinal's", sibling: stsReservation("req", "10.0.0.9", newer, user("dst", "apps/imposter", "ui", "node-b")),
			pods: []client.Object{imposter}},
		{name: "a user whose pod is gone", sibling: stsReservation("req", "10.0.0.9", newer, user("dst", "apps/db-1", "u1", "node-a"))},
		{name: "a sibling without users", sibling: stsReservation("req", "10.0.0.9", newer)},
		{name: "a sibling of another pool", sibling: otherPool, pods: []client.Object{stsPod("db-1", "u1", "node-a", corev1.PodRunning)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(policyScheme(t)).WithObjects(append(tt.pods, sts.DeepCopy(), idle.DeepCopy(), tt.sibling)...).Build()
			f, err := Read(t.Context(), crclient.Reader(c), idle)
			if err != nil {
				t.Fatal(err)
			}
			if v := Judge(idle, f, policyNow, policyGrace); v.Reason != tt.want {
				t.Fatalf("facts %+v: verdict %+v, want reason %q", f, v, tt.want)
			}
		})
	}
}

// TestSupersededClaim: of two first ADDs of one IPAMClaim on two nodes at once (two reservations of
// the claim, docs/persistent-ips.md), the one no pod is bound to goes once a pod that references
// the claim, on its user's node, is bound to the other; a pod that references another claim, or a
// user on another node than its pod, frees nothing.
func TestSupersededClaim(t *testing.T) {
	old, newer := policyNow.Add(-3*policyGrace), policyNow.Add(-2*policyGrace)
	claim := &ipamclaimsv1.IPAMClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "vm-a.anet", UID: "c1"}}
	o := ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: "vms", Name: "vm-a.anet", UID: "c1"}
	res := func(name, addr string, created time.Time, users ...ipamv1.ReservationUser) *ipamv1.OverlappingRangeIPReservation {
		r := &ipamv1.OverlappingRangeIPReservation{
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{
				ipamv1.OwnerLabel: ipamv1.OwnerLabelValue(o.Key()), ipamv1.PoolLabel: ipamv1.LabelValue("p")}},
			Spec: ipamv1.OverlappingRangeIPReservationSpec{Address: addr, Pool: "p", Owner: o.DeepCopy(), Users: users},
		}
		if len(users) > 0 {
			r.Spec.ContainerID, r.Spec.IfName, r.Spec.PodRef, r.Spec.PodUID = users[0].ContainerID, users[0].IfName, users[0].PodRef, users[0].PodUID
		}
		return r
	}
	launcher := func(name, uid, node, ref string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: name, UID: types.UID(uid), Annotations: map[string]string{
			podowner.NetworksAnnotation: `[{"name":"vm-net","ipam-claim-reference":"` + ref + `"}]`}},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	idle := res("idle", "10.0.0.5", old) // the first ADD on node-b, its pod deleted (DEL unbound it)
	for _, tt := range []struct {
		name string
		user ipamv1.ReservationUser
		pod  *corev1.Pod
		want string
	}{
		{"the claim's launcher pod bound to the other", user("a", "vms/launcher-a", "ua", "node-a"), launcher("launcher-a", "ua", "node-a", "vm-a.anet"), ReasonSuperseded},
		{"a pod of another claim", user("a", "vms/launcher-a", "ua", "node-a"), launcher("launcher-a", "ua", "node-a", "vm-b.anet"), ""},
		{"a user on another node than its pod", user("a", "vms/launcher-a", "ua", "node-b"), launcher("launcher-a", "ua", "node-a", "vm-a.anet"), ""},
		{"the user's pod gone", user("a", "vms/launcher-a", "ua", "node-a"), nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			objs := []client.Object{claim.DeepCopy(), idle.DeepCopy(), res("bound", "10.0.0.9", newer, tt.user)}
			if tt.pod != nil {
				objs = append(objs, tt.pod)
			}
			c := fake.NewClientBuilder().WithScheme(policyScheme(t)).WithObjects(objs...).Build()
			f, err := Read(t.Context(), crclient.Reader(c), idle)
			if err != nil {
				t.Fatal(err)
			}
			v := Judge(idle, f, policyNow, policyGrace)
			if v.Reason != tt.want || (tt.want != "" && !strings.Contains(v.Detail, "IPAMClaim vms/vm-a.anet moved to bound (10.0.0.9), bound to pod vms/launcher-a on node node-a")) {
				t.Fatalf("facts %+v: verdict %+v, want reason %q", f, v, tt.want)
			}
		})
	}
}

// TestClaimMadeAgain: a claim of the recorded name with another UID is another claim: the
// address was the deleted one's.
func TestClaimMadeAgain(t *testing.T) {
	claim := &ipamclaimsv1.IPAMClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "vm-a.anet", UID: "new"}}
	c := fake.NewClientBuilder().WithScheme(policyScheme(t)).WithObjects(claim).Build()
	for _, tt := range []struct {
		uid, want string
	}{
		{"old", ReasonOwnerDeleted},
		{"new", ""},
		{"", ""}, // recorded before netpool kept the UID: the claim of the name owns it
	} {
		r := &ipamv1.OverlappingRangeIPReservation{
			ObjectMeta: metav1.ObjectMeta{Name: "r", CreationTimestamp: metav1.NewTime(policyNow.Add(-2 * policyGrace))},
			Spec: ipamv1.OverlappingRangeIPReservationSpec{Address: "10.0.0.5", Pool: "p",
				Owner: &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: "vms", Name: "vm-a.anet", UID: tt.uid}},
		}
		f, err := Read(t.Context(), crclient.Reader(c), r)
		if err != nil {
			t.Fatal(err)
		}
		v := Judge(r, f, policyNow, policyGrace)
		if v.Reason != tt.want || (tt.want != "" && !strings.Contains(v.Detail, "IPAMClaim vms/vm-a.anet was deleted and made again (UID new; the address was claim UID old's)")) {
			t.Fatalf("recorded UID %q: verdict %+v, want reason %q", tt.uid, v, tt.want)
		}
	}
}
