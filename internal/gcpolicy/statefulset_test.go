package gcpolicy

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/kubeclient/crclient"
	"github.com/netpool/netpool/internal/scheme"
)

// TestStatefulSetOwnerFacts: a StatefulSet owns an ordinal's address while it exists with more
// replicas than the ordinal; Judge releases it with the matching reason after the grace.
func TestStatefulSetOwnerFacts(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	const grace = time.Minute
	kinds, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	sts := func(replicas *int32) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db"}, Spec: appsv1.StatefulSetSpec{Replicas: replicas}}
	}
	res := func(ordinal int32, age time.Duration) *ipamv1.OverlappingRangeIPReservation {
		return &ipamv1.OverlappingRangeIPReservation{
			ObjectMeta: metav1.ObjectMeta{Name: "r", CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Spec: ipamv1.OverlappingRangeIPReservationSpec{Address: "10.0.0.5", Pool: "p", PodRef: "apps/db-1",
				Owner: &ipamv1.ReservationOwner{Kind: ipamv1.OwnerStatefulSet, Namespace: "apps", Name: "db", Ordinal: &ordinal, Interface: "net1"}},
		}
	}
	one, three := int32(1), int32(3)
	for _, tt := range []struct {
		name       string
		sts        *appsv1.StatefulSet
		ordinal    int32
		age        time.Duration
		wantReason string
		wantDetail string
		recheck    bool
	}{
		{name: "ordinal below replicas: kept", sts: sts(&three), ordinal: 2, age: 2 * grace},
		{name: "replicas unset count as 1: ordinal 0 kept", sts: sts(nil), ordinal: 0, age: 2 * grace},
		{name: "replicas unset count as 1: ordinal 1 released", sts: sts(nil), ordinal: 1, age: 2 * grace,
			wantReason: ReasonOwnerScaledDown, wantDetail: "StatefulSet apps/db has 1 replicas, so ordinal 1 is gone"},
		{name: "scaled to the ordinal: released", sts: sts(&one), ordinal: 1, age: 2 * grace,
			wantReason: ReasonOwnerScaledDown, wantDetail: "StatefulSet apps/db has 1 replicas, so ordinal 1 is gone"},
		{name: "scaled down, younger than the grace", sts: sts(&one), ordinal: 2, age: grace / 2, recheck: true},
		{name: "StatefulSet gone: released", ordinal: 0, age: 2 * grace,
			wantReason: ReasonOwnerDeleted, wantDetail: "StatefulSet apps/db no longer exists"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(kinds)
			if tt.sts != nil {
				b = b.WithObjects(tt.sts)
			}
			r := res(tt.ordinal, tt.age)
			f, err := Read(t.Context(), crclient.Reader(b.Build()), r)
			if err != nil {
				t.Fatal(err)
			}
			if f.Pod != nil {
				t.Fatal("a persistently owned reservation must not be judged by its pod")
			}
			v := Judge(r, f, now, grace)
			if v.Reason != tt.wantReason || (tt.wantDetail != "" && v.Detail != tt.wantDetail) || (v.Recheck > 0) != tt.recheck {
				t.Fatalf("facts %+v: verdict %+v, want reason %q detail %q recheck %v", f, v, tt.wantReason, tt.wantDetail, tt.recheck)
			}
		})
	}
}
