package ippool

import (
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

func TestDeriveRecordsStatefulSets(t *testing.T) {
	r, err := ipam.ParseRange("range", ipam.RangeSpec{Range: "10.0.0.0/29"}, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	for sticky, want := range map[bool]ipamv1.StatefulSets{false: "", true: ipamv1.StatefulSetsSticky} {
		p, err := Derive("blue", r, Rules{Overlapping: true, Sticky: sticky})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.StatefulSets != want || Sticky(p) != sticky {
			t.Errorf("Derive with sticky %v records %q", sticky, p.Spec.StatefulSets)
		}
	}
}

func TestResolveSticky(t *testing.T) {
	pool := func(v ipamv1.StatefulSets) *ipamv1.IPPool {
		return &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: ipamv1.IPPoolSpec{Range: "10.0.0.0/24", StatefulSets: v}}
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
		name    string
		pool    ipamv1.StatefulSets
		field   string
		want    bool
		wantErr string
	}{
		{name: "unset follows a Sticky pool", pool: ipamv1.StatefulSetsSticky, want: true},
		{name: "unset follows a pool without it", pool: ""},
		{name: "agreeing Sticky", pool: ipamv1.StatefulSetsSticky, field: `,"statefulSets":"Sticky"`, want: true},
		{name: "None agrees with unset", pool: "", field: `,"statefulSets":"None"`},
		{name: "None agrees with None", pool: ipamv1.StatefulSetsNone, field: `,"statefulSets":"None"`},
		{name: "Sticky against a pool without it", pool: "", field: `,"statefulSets":"Sticky"`,
			wantErr: "statefulSets Sticky disagrees with IPPool db, which records statefulSets None: every config of one pool must agree (or leave statefulSets out to follow the pool)"},
		{name: "None against a Sticky pool", pool: ipamv1.StatefulSetsSticky, field: `,"statefulSets":"None"`, want: true,
			wantErr: "statefulSets None disagrees with IPPool db, which records statefulSets Sticky"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveSticky(pool(tt.pool), conf(tt.field))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("ResolveSticky = %v, want %v", got, tt.want)
			}
		})
	}
}
