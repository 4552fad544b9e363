package ippool

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

func TestDeriveRecordsTheCooldown(t *testing.T) {
	r, err := ipam.ParseRange("range", ipam.RangeSpec{Range: "10.0.0.0/29"}, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	for d, want := range map[time.Duration]string{0: "", 30 * time.Second: "30s", 90 * time.Minute: "1h30m0s", ipam.MaxReuseCooldown: "168h0m0s"} {
		p, err := Derive("blue", r, Rules{Overlapping: true, Cooldown: d})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.ReuseCooldown != want {
			t.Errorf("Derive with %v records %q, want %q", d, p.Spec.ReuseCooldown, want)
		}
		if got, err := Cooldown(p); err != nil || got != d {
			t.Errorf("Cooldown of the pool derived with %v = %v, %v", d, got, err)
		}
	}
}

func TestResolveCooldown(t *testing.T) {
	pool := func(v string) *ipamv1.IPPool {
		return &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "blue"}, Spec: ipamv1.IPPoolSpec{Range: "10.0.0.0/24", ReuseCooldown: v}}
	}
	conf := func(field string) *ipam.Config {
		t.Helper()
		c, err := ipam.Load([]byte(`{"name":"n","ipam":{"type":"netpool","range":"10.0.0.0/24"`+field+`}}`), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tt := range []struct {
		name, pool, field string
		want              time.Duration
		err               string
	}{
		{"unset follows the pool", "1h", ``, time.Hour, ""},
		{"unset on both", "", ``, 0, ""},
		{"agreeing", "30s", `,"reuseCooldown":"30s"`, 30 * time.Second, ""},
		{"agreeing in another spelling", "1h30m0s", `,"reuseCooldown":"90m"`, 90 * time.Minute, ""},
		{"0s agrees with a pool without one", "", `,"reuseCooldown":"0s"`, 0, ""},
		{"a longer one", "30s", `,"reuseCooldown":"1h"`, 30 * time.Second,
			"reuseCooldown 1h0m0s disagrees with IPPool blue, which records reuseCooldown 30s: every config of one pool must agree (or leave reuseCooldown out to follow the pool)"},
		{"one where the pool has none", "", `,"reuseCooldown":"1m"`, 0,
			"reuseCooldown 1m0s disagrees with IPPool blue, which records reuseCooldown 0s (none): every config of one pool must agree"},
		{"none where the pool has one", "1m", `,"reuseCooldown":"0s"`, time.Minute,
			"reuseCooldown 0s disagrees with IPPool blue, which records reuseCooldown 1m0s"},
		{"a pool the API server did not check", "soon", ``, 0,
			`IPPool blue: invalid IPAM config: spec.reuseCooldown "soon": want a duration such as 30s or 1h`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveCooldown(pool(tt.pool), conf(tt.field))
			if tt.err == "" {
				if err != nil || got != tt.want {
					t.Fatalf("ResolveCooldown = %v, %v; want %v", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("err = %v, want one containing %q", err, tt.err)
			}
		})
	}
}
