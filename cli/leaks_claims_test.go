package cli

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/gcpolicy"
)

// TestLeaksJudgesClaimedAddressesByTheirClaim: an address an IPAMClaim owns is no leak while the
// claim exists, even with its pod gone (a stopped VM), and is one, OwnerDeleted, once the claim is
// deleted: the controller's policy, read through the same lookups (the claim from the cluster,
// the pods from one list).
func TestLeaksJudgesClaimedAddressesByTheirClaim(t *testing.T) {
	e := newLCEnv(t)
	e.env.InstallIPAMClaimCRD(t)
	const ns = "ctlops-claims"
	e.namespace(ns)
	p := e.pool("ctlops-claims", ipamv1.IPPoolSpec{Range: "10.77.2.0/24", NetworkName: "ctlops-claims"})
	claim := &ipamclaimsv1.IPAMClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm-a.net1"},
		Spec:       ipamclaimsv1.IPAMClaimSpec{Network: "ctlops-claims", Interface: "net1"},
	}
	e.create(claim)
	kept := e.reservationWith(p, "10.77.2.10", ns+"/virt-launcher-vm-a-1", "uid-of-a-stopped-vm", "ctlops-node-a", func(r *ipamv1.OverlappingRangeIPReservation) {
		r.Spec.Owner = &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: ns, Name: claim.Name}
	})
	orphan := e.reservationWith(p, "10.77.2.11", ns+"/virt-launcher-vm-b-1", "uid-of-vm-b", "ctlops-node-a", func(r *ipamv1.OverlappingRangeIPReservation) {
		r.Spec.Owner = &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: ns, Name: "vm-b.net1"}
	})
	now := latestCreation(kept, orphan).Add(time.Hour)
	before := e.snapshot()

	out, errOut, err := runCLIAt(t, now, "--kubeconfig", e.env.Kubeconfig, "leaks", "-n", ns, "-o", "json")
	if err != nil {
		t.Fatalf("leaks: %v (stderr %s)", err, errOut)
	}
	var report leakReport
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatal(err)
	}
	if len(report.Leaks) != 1 || report.Leaks[0].Address != "10.77.2.11" || report.Leaks[0].Reason != gcpolicy.ReasonOwnerDeleted {
		t.Fatalf("leaks %+v; want only 10.77.2.11, %s (its claim does not exist), and not 10.77.2.10, whose claim does", report.Leaks, gcpolicy.ReasonOwnerDeleted)
	}
	if after := e.snapshot(); !bytes.Equal(before, after) {
		t.Fatalf("leaks changed reservations:\n%s\nthen\n%s", before, after)
	}
}
