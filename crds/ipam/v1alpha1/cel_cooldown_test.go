package v1alpha1_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
	"github.com/netpool/netpool/test/envtest"
)

// TestCELReuseCooldown runs spec.reuseCooldown's bounds and CEL rules on a real API server, and
// checks that the API server and the config parser (ipam.ParseReuseCooldown) agree on every value,
// so a cool-down accepted on a pool is one a NAD may state and the reverse.
func TestCELReuseCooldown(t *testing.T) {
	env := envtest.Start(t)
	const grammar = "must be a duration such as 30s or 1h (0s for none)"
	const bounds = "must be 0s (none) or from 1s to 168h"
	for _, tt := range []struct {
		value string
		want  []string
	}{
		{"30s", nil},
		{"1h", nil},
		{"1h30m", nil},
		{"1.5h", nil},
		{"0s", nil},
		{"1s", nil},
		{"168h", nil},
		{"10080m", nil},
		{"999ms", []string{"reuseCooldown 999ms " + bounds}},
		{"168h1s", []string{"reuseCooldown 168h1s " + bounds}},
		{"999999h999999h9h", []string{"reuseCooldown 999999h999999h9h " + bounds}},
		{"30", []string{"reuseCooldown 30 " + grammar}},
		{"-1s", []string{"reuseCooldown -1s " + grammar}},
		{"soon", []string{"reuseCooldown soon " + grammar}},
		{"1d", []string{"reuseCooldown 1d " + grammar}},
		{"1000000h", []string{"reuseCooldown 1000000h " + grammar}},
		{"1h 30m", []string{"reuseCooldown 1h 30m " + grammar}},
		{"0", nil},
		{"3600000ms", []string{"reuseCooldown 3600000ms " + grammar}},
		{"+1s", []string{"reuseCooldown +1s " + grammar}},
		{"1µs", []string{"reuseCooldown 1µs " + grammar}},
		{"99999h99999h99999h", []string{"spec.reuseCooldown: Too long"}},
	} {
		t.Run(tt.value, func(t *testing.T) {
			p := validPool()
			p.Spec.ReuseCooldown = tt.value
			err := env.Client.Create(t.Context(), p)
			checkErr(t, err, tt.want)
			if _, perr := ipam.ParseReuseCooldown("reuseCooldown", tt.value); (perr == nil) != (err == nil) {
				t.Errorf("the API server says %v, the config parser %v: they must agree", err, perr)
			}
		})
	}
	t.Run("may be changed", func(t *testing.T) {
		p := validPool()
		p.Spec.ReuseCooldown = "30s"
		if err := env.Client.Create(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		p.Spec.ReuseCooldown = "5m"
		checkErr(t, env.Client.Update(t.Context(), p), nil)
		got := &ipamv1.IPPool{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(p), got); err != nil || got.Spec.ReuseCooldown != "5m" {
			t.Fatalf("after the update the pool records %q, %v; want 5m", got.Spec.ReuseCooldown, err)
		}
	})
}

// TestCELSliceCooling runs spec.cooling's rules on a real API server: each entry an address of the
// block with its release time, at most MaxSliceCooling of them, and a full list within the CEL
// cost budget (the API server refuses a CRD whose rules could cost too much, and an object whose
// rules did).
func TestCELSliceCooling(t *testing.T) {
	env := envtest.Start(t)
	at := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	many := func(n int) []ipamv1.CoolingAddress {
		out := make([]ipamv1.CoolingAddress, n)
		for i := range out {
			out[i] = ipamv1.CoolingAddress{Address: fmt.Sprintf("fd00::%x", 0x100+i), ReleasedAt: at}
		}
		return out
	}
	const outside = "every cooling address must be an address of the block (spec.range)"
	for _, tt := range []struct {
		name    string
		rng     string
		cooling []ipamv1.CoolingAddress
		want    []string
	}{
		{"IPv4 in the block", "10.0.1.64/26", []ipamv1.CoolingAddress{{Address: "10.0.1.70", ReleasedAt: at}, {Address: "10.0.1.127", ReleasedAt: at}}, nil},
		{"IPv6 in the block", "fd00::/116", []ipamv1.CoolingAddress{{Address: "fd00::fff", ReleasedAt: at}}, nil},
		{"the most entries", "fd00::/116", many(ipamv1.MaxSliceCooling), nil},
		{"one entry too many", "fd00::/116", many(ipamv1.MaxSliceCooling + 1), []string{"spec.cooling: Too many: 513: must have at most 512 items"}},
		{"outside the block", "10.0.1.64/26", []ipamv1.CoolingAddress{{Address: "10.0.1.128", ReleasedAt: at}}, []string{outside}},
		{"not an address", "10.0.1.64/26", []ipamv1.CoolingAddress{{Address: "10.0.1.300", ReleasedAt: at}}, []string{outside}},
		{"no release time", "10.0.1.64/26", []ipamv1.CoolingAddress{{Address: "10.0.1.70"}}, []string{"spec.cooling[0].releasedAt: Required value"}},
		{"no address", "10.0.1.64/26", []ipamv1.CoolingAddress{{ReleasedAt: at}}, []string{"spec.cooling[0].address: Required value"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := validSlice()
			s.Spec.Range = tt.rng
			s.Spec.Cooling = tt.cooling
			checkErr(t, env.Client.Create(t.Context(), s), tt.want)
		})
	}
	t.Run("written and emptied by an update", func(t *testing.T) {
		s := validSlice()
		if err := env.Client.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
		s.Spec.Cooling = []ipamv1.CoolingAddress{{Address: "10.0.1.65", ReleasedAt: at}}
		checkErr(t, env.Client.Update(t.Context(), s), nil)
		s.Spec.Cooling = []ipamv1.CoolingAddress{{Address: "10.0.2.1", ReleasedAt: at}}
		checkErr(t, env.Client.Update(t.Context(), s), []string{outside})
		s.Spec.Cooling = nil
		got := &ipamv1.IPPoolSlice{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(s), got); err != nil {
			t.Fatal(err)
		}
		got.Spec.Cooling = nil
		checkErr(t, env.Client.Update(t.Context(), got), nil)
	})
}
