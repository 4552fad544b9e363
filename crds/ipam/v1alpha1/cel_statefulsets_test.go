package v1alpha1_test

import (
	"testing"

	"k8s.io/utils/ptr"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/envtest"
)

// TestCELStatefulSets runs the rules of spec.statefulSets on an IPPool and of a StatefulSet owner
// on a reservation on a real API server, each with its message.
func TestCELStatefulSets(t *testing.T) {
	env := envtest.Start(t)
	t.Run("IPPool spec.statefulSets", func(t *testing.T) {
		for _, tt := range []struct {
			value ipamv1.StatefulSets
			want  []string
		}{
			{ipamv1.StatefulSetsSticky, nil},
			{ipamv1.StatefulSetsNone, nil},
			{"sticky", []string{`spec.statefulSets: Unsupported value: "sticky": supported values: "Sticky", "None"`}},
			{"Always", []string{`spec.statefulSets: Unsupported value: "Always"`}},
			{"StickyStickySticky", []string{"spec.statefulSets: Too long"}},
		} {
			t.Run(string(tt.value), func(t *testing.T) {
				p := validPool()
				p.Spec.StatefulSets = tt.value
				checkErr(t, env.Client.Create(t.Context(), p), tt.want)
			})
		}
		t.Run("may be changed", func(t *testing.T) {
			p := validPool()
			p.Spec.StatefulSets = ipamv1.StatefulSetsSticky
			checkErr(t, env.Client.Create(t.Context(), p), nil)
			p.Spec.StatefulSets = ipamv1.StatefulSetsNone
			checkErr(t, env.Client.Update(t.Context(), p), nil)
		})
	})
	t.Run("reservation owned by a StatefulSet", func(t *testing.T) {
		sts := func(ordinal *int32, ifName string) *ipamv1.ReservationOwner {
			return &ipamv1.ReservationOwner{Kind: ipamv1.OwnerStatefulSet, Namespace: "apps", Name: "db", Ordinal: ordinal, Interface: ifName}
		}
		for _, tt := range []struct {
			name  string
			owner *ipamv1.ReservationOwner
			want  []string
		}{
			{"ordinal and interface", sts(ptr.To[int32](2), "net1"), nil},
			{"ordinal 0", sts(ptr.To[int32](0), "net1"), nil},
			{"no ordinal", sts(nil, "net1"), []string{"ordinal is set for, and only for, an owner of kind StatefulSet"}},
			{"no interface", sts(ptr.To[int32](1), ""), []string{"interface is set for, and only for, an owner of kind StatefulSet"}},
			{"negative ordinal", sts(ptr.To[int32](-1), "net1"), []string{"spec.owner.ordinal in body should be greater than or equal to 0"}},
			{"interface with a slash", sts(ptr.To[int32](1), "a/b"), []string{"spec.owner.interface in body should match"}},
			{"interface too long", sts(ptr.To[int32](1), "abcdefghijklmnop"), []string{"spec.owner.interface: Too long"}},
			{"an IPAMClaim with an ordinal", &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: "vms", Name: "a", Ordinal: ptr.To[int32](0)},
				[]string{"ordinal is set for, and only for, an owner of kind StatefulSet"}},
			{"an IPAMClaim with an interface", &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: "vms", Name: "a", Interface: "net1"},
				[]string{"interface is set for, and only for, an owner of kind StatefulSet"}},
			{"an IPAMClaim with its UID", &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: "vms", Name: "a", UID: "0d7f6c1e-5a4b-4c3d-9e8f-7a6b5c4d3e2f"}, nil},
			{"a StatefulSet with a UID", &ipamv1.ReservationOwner{Kind: ipamv1.OwnerStatefulSet, Namespace: "apps", Name: "db", Ordinal: ptr.To[int32](0), Interface: "net1", UID: "u"},
				[]string{"uid is set only for an owner of kind IPAMClaim"}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				r := validReservation()
				r.Spec.Owner = tt.owner
				checkErr(t, env.Client.Create(t.Context(), r), tt.want)
			})
		}
		t.Run("the ordinal cannot change", func(t *testing.T) {
			r := validReservation()
			r.Spec.Owner = sts(ptr.To[int32](1), "net1")
			checkErr(t, env.Client.Create(t.Context(), r), nil)
			r.Spec.Owner.Ordinal = ptr.To[int32](2)
			checkErr(t, env.Client.Update(t.Context(), r), []string{"owner is immutable"})
		})
		t.Run("the claim's UID cannot change", func(t *testing.T) {
			r := validReservation()
			r.Spec.Owner = &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: "vms", Name: "a", UID: "first"}
			checkErr(t, env.Client.Create(t.Context(), r), nil)
			r.Spec.Owner.UID = "second"
			checkErr(t, env.Client.Update(t.Context(), r), []string{"owner is immutable"})
		})
	})
}
