package gcpolicy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	networkv1 "github.com/netpool/netpool/crds/network/v1"
)

func TestOnDeletedNode(t *testing.T) {
	res := func(set func(*ipamv1.OverlappingRangeIPReservation)) *ipamv1.OverlappingRangeIPReservation {
		r := &ipamv1.OverlappingRangeIPReservation{
			ObjectMeta: metav1.ObjectMeta{Name: "r"},
			Spec:       ipamv1.OverlappingRangeIPReservationSpec{Address: "10.0.0.5", Pool: "p", PodRef: "ns/web", Node: "gone"},
		}
		if set != nil {
			set(r)
		}
		return r
	}
	podOn := func(node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.PodSpec{NodeName: node}}
	}
	tests := []struct {
		name       string
		res        *ipamv1.OverlappingRangeIPReservation
		pod        *corev1.Pod
		wantReason string
		wantDetail string
	}{
		{name: "pod gone: released with the node", res: res(nil), wantReason: ReasonNodeDeleted, wantDetail: "node gone was deleted"},
		{name: "pod on that node: released", res: res(nil), pod: podOn("gone"), wantReason: ReasonNodeDeleted},
		{name: "pod not scheduled: released", res: res(nil), pod: podOn(""), wantReason: ReasonNodeDeleted},
		{name: "pod runs elsewhere: kept, said why", res: res(nil), pod: podOn("other"), wantDetail: "runs on node other"},
		{name: "an EgressRouter's address: kept", res: res(func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Labels = map[string]string{networkv1.RouterUIDLabel: "uid"}
		})},
		{name: "a claimed address: kept", res: res(func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.Owner = &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: "ns", Name: "vm.net1"}
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := OnDeletedNode(tt.res, tt.pod, "gone")
			if v.Reason != tt.wantReason || !strings.Contains(v.Detail, tt.wantDetail) || (tt.wantDetail == "" && tt.wantReason == "" && v.Detail != "") {
				t.Fatalf("verdict %+v, want reason %q and a detail containing %q", v, tt.wantReason, tt.wantDetail)
			}
		})
	}
}
