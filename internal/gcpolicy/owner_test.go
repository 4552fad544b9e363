package gcpolicy

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// TestJudgeClaimedReservation: an IPAMClaim's address is judged by its claim alone, whatever its
// pods do; the pod rules never release it.
func TestJudgeClaimedReservation(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	const grace = time.Minute
	claimed := func(age time.Duration) *ipamv1.OverlappingRangeIPReservation {
		return &ipamv1.OverlappingRangeIPReservation{
			ObjectMeta: metav1.ObjectMeta{Name: "r", CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Spec: ipamv1.OverlappingRangeIPReservationSpec{Address: "10.0.0.5", Pool: "p", PodRef: "vms/virt-launcher-a", PodUID: "u1",
				Owner: &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: "vms", Name: "vm-a.net1"}},
		}
	}
	noPod := claimed(2 * grace)
	noPod.Spec.PodRef, noPod.Spec.PodUID = "", ""
	tests := []struct {
		name        string
		res         *ipamv1.OverlappingRangeIPReservation
		facts       Facts
		wantReason  string
		wantRecheck time.Duration
		wantDetail  string
	}{
		{name: "claim exists, pod gone: kept", res: claimed(2 * grace), facts: Facts{OwnerExists: true}},
		{name: "claim gone: released", res: claimed(2 * grace), wantReason: ReasonOwnerDeleted, wantDetail: "IPAMClaim vms/vm-a.net1 no longer exists"},
		{name: "claim gone but younger than the grace", res: claimed(grace / 2), wantRecheck: grace / 2},
		{name: "no pod identity, claim gone: released", res: noPod, wantReason: ReasonOwnerDeleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !Judgeable(tt.res) {
				t.Fatal("a claimed reservation must be judgeable")
			}
			v := Judge(tt.res, tt.facts, now, grace)
			if v.Reason != tt.wantReason || v.Recheck != tt.wantRecheck || (tt.wantDetail != "" && v.Detail != tt.wantDetail) {
				t.Fatalf("verdict %+v, want reason %q recheck %s detail %q", v, tt.wantReason, tt.wantRecheck, tt.wantDetail)
			}
		})
	}
}
