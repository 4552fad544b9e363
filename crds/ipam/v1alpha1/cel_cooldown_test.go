package v1alpha1_test

import (
	"testing"

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
