package cli

import (
	"strings"
	"testing"
	"time"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// TestReleaseOfPersistentOwners: netpoolctl release works on every owner kind: it refuses the
// address of an IPAMClaim that exists and of a StatefulSet scaled down while its pod still runs,
// with the policy's reason and without a panic, releases them with --force, and releases without
// it what the policy gives a reason for (the claim gone, no pod bound).
func TestReleaseOfPersistentOwners(t *testing.T) {
	e := newLCEnv(t)
	e.env.InstallIPAMClaimCRD(t)
	const ns = "ctlops-release-owners"
	e.namespace(ns)
	p := e.pool("ctlops-release-owners", ipamv1.IPPoolSpec{Range: "10.77.3.0/24", NetworkName: "ctlops-release-owners"})
	claim := &ipamclaimsv1.IPAMClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm-a.anet"},
		Spec: ipamclaimsv1.IPAMClaimSpec{Network: "ctlops-release-owners"}}
	e.create(claim)
	claimed := e.reservationWith(p, "10.77.3.10", ns+"/virt-launcher-vm-a-1", "uid-a", "ctlops-node-a", func(r *ipamv1.OverlappingRangeIPReservation) {
		r.Spec.Owner = &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: ns, Name: claim.Name, UID: string(claim.UID)}
	})
	orphan := e.reservationWith(p, "10.77.3.11", ns+"/virt-launcher-vm-b-1", "uid-b", "ctlops-node-a", func(r *ipamv1.OverlappingRangeIPReservation) {
		r.Spec.Owner = &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: ns, Name: "vm-b.anet"}
	})
	e.create(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db"}}}}}})
	running := e.pod(ns, "db-1", corev1.PodRunning, nil)
	scaled := e.reservationWith(p, "10.77.3.12", ns+"/db-1", string(running.UID), "ctlops-node-a", func(r *ipamv1.OverlappingRangeIPReservation) {
		r.Spec.Owner = &ipamv1.ReservationOwner{Kind: ipamv1.OwnerStatefulSet, Namespace: ns, Name: "db", Ordinal: ptr.To[int32](1), Interface: "net1"}
		r.Spec.Users = []ipamv1.ReservationUser{{ContainerID: r.Spec.ContainerID, IfName: "net1", PodRef: ns + "/db-1", PodUID: string(running.UID), Node: "ctlops-node-a"}}
	})
	now := latestCreation(claimed, orphan, scaled).Add(time.Hour)
	release := func(args ...string) (string, error) {
		t.Helper()
		_, errOut, err := runCLIAt(t, now, append([]string{"--kubeconfig", e.env.Kubeconfig, "release", "--yes"}, args...)...)
		if err != nil {
			return err.Error(), err
		}
		return errOut, nil
	}
	exists := func(r *ipamv1.OverlappingRangeIPReservation) bool {
		err := e.c.Get(e.ctx, client.ObjectKeyFromObject(r), &ipamv1.OverlappingRangeIPReservation{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	for _, tt := range []struct {
		addr string
		res  *ipamv1.OverlappingRangeIPReservation
		want string
	}{
		{"10.77.3.10", claimed, "IPAMClaim " + ns + "/vm-a.anet exists: the address belongs to it, whatever its pods do, until it is gone"},
		{"10.77.3.12", scaled, "StatefulSet " + ns + "/db has 1 replicas, so ordinal 1 is gone, but pod " + ns + "/db-1 on node ctlops-node-a still bound to 10.77.3.12"},
	} {
		msg, err := release(tt.addr)
		if err == nil || !strings.Contains(msg, "refusing to release while the owner is alive") || !strings.Contains(msg, tt.want) {
			t.Errorf("release %s: %q, %v; want a refusal saying %q", tt.addr, msg, err, tt.want)
		}
		if !exists(tt.res) {
			t.Fatalf("the refused release of %s removed it", tt.addr)
		}
	}
	if msg, err := release("10.77.3.11"); err != nil || exists(orphan) {
		t.Errorf("release of the address of a deleted claim, no pod bound: %q, %v", msg, err)
	}
	if msg, err := release("10.77.3.10", "--force"); err != nil || exists(claimed) {
		t.Errorf("release --force of a claim's address: %q, %v", msg, err)
	}
	// The pod goes: nothing is bound to the scaled-down ordinal's address any more.
	if err := e.c.Delete(e.ctx, running); err != nil {
		t.Fatal(err)
	}
	if msg, err := release("10.77.3.12"); err != nil || exists(scaled) {
		t.Errorf("release of the scaled-down ordinal's address once its pod is gone: %q, %v", msg, err)
	}
}
