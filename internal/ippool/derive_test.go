package ippool

import (
	"net/netip"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

func TestDerive(t *testing.T) {
	tests := []struct {
		name    string
		spec    ipam.RangeSpec
		gateway string
		want    ipamv1.IPPoolSpec
	}{
		{name: "a whole subnet", spec: ipam.RangeSpec{Range: "10.0.0.0/24"}, want: ipamv1.IPPoolSpec{Range: "10.0.0.0/24", NetworkName: "n"}},
		{name: "a window, exclusions and a gateway", gateway: "10.0.0.1",
			spec: ipam.RangeSpec{Range: "10.0.0.0/24", RangeStart: "10.0.0.10", RangeEnd: "10.0.0.100", Exclude: []string{"10.0.0.16/28", "10.0.0.33", "10.0.0.34"}},
			want: ipamv1.IPPoolSpec{Range: "10.0.0.0/24", NetworkName: "n", RangeStart: "10.0.0.10", RangeEnd: "10.0.0.100",
				Gateway: "10.0.0.1", Exclude: []string{"10.0.0.16/28", "10.0.0.33", "10.0.0.34"}}},
		{name: "whereabouts A-B/nn", spec: ipam.RangeSpec{Range: "10.0.0.5-10.0.0.50/24"},
			want: ipamv1.IPPoolSpec{Range: "10.0.0.0/24", NetworkName: "n", RangeStart: "10.0.0.5", RangeEnd: "10.0.0.50"}},
		{name: "IPv6", spec: ipam.RangeSpec{Range: "fd00::/120", Exclude: []string{"fd00::10/124"}},
			want: ipamv1.IPPoolSpec{Range: "fd00::/120", NetworkName: "n", Exclude: []string{"fd00::10/124"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gw netip.Addr
			if tt.gateway != "" {
				gw = netip.MustParseAddr(tt.gateway)
			}
			r, err := ipam.ParseRange("range", tt.spec, gw)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Derive("n", r, Rules{Overlapping: true})
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != ipamv1.PoolName("n", r.Subnet) || !equality.Semantic.DeepEqual(p.Spec, tt.want) {
				t.Fatalf("pool %s %+v, want %+v", p.Name, p.Spec, tt.want)
			}
			if !IsDerived(p) {
				t.Fatalf("labels %v: the pool is not marked derived", p.Labels)
			}
			if err := CheckDerivedFor(p, "n", r); err != nil {
				t.Fatal(err)
			}
			// Parsed back, the pool is the range the config describes.
			back, err := RangeOf(&p.Spec)
			if err != nil {
				t.Fatal(err)
			}
			if back.Start != r.Start || back.End != r.End || back.Capacity().Cmp(r.Capacity()) != 0 {
				t.Fatalf("the pool parses to %s-%s (%s), the config to %s-%s (%s)", back.Start, back.End, back.Capacity(), r.Start, r.End, r.Capacity())
			}
		})
	}
	if _, err := Derive("", ipam.Range{}, Rules{Overlapping: true}); err == nil {
		t.Fatal("an invalid range made a pool")
	}
}

func TestAdmitsNamespace(t *testing.T) {
	pool := func(sel *metav1.LabelSelector) *ipamv1.IPPool {
		return &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: ipamv1.IPPoolSpec{NamespaceSelector: sel}}
	}
	tests := []struct {
		name    string
		sel     *metav1.LabelSelector
		labels  map[string]string
		wantErr string
	}{
		{name: "no selector admits every namespace"},
		{name: "an empty selector admits every namespace", sel: &metav1.LabelSelector{}},
		{name: "matching labels", sel: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "red"}}, labels: map[string]string{"team": "red", "x": "y"}},
		{name: "other labels", sel: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "red"}}, labels: map[string]string{"team": "blue"},
			wantErr: `IPPool p does not admit namespace ns: its namespaceSelector is "team=red"`},
		{name: "no labels", sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpExists}}},
			wantErr: `IPPool p does not admit namespace ns: its namespaceSelector is "team"`},
		{name: "an invalid selector", sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}},
			wantErr: `IPPool p has an invalid namespaceSelector: "Near" is not a valid label selector operator`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := AdmitsNamespace(pool(tt.sel), "ns", tt.labels)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestDeriveRecordsTheMode(t *testing.T) {
	r, err := ipam.ParseRange("range", ipam.RangeSpec{Range: "10.0.0.0/29"}, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	on, _ := Derive("ovn", r, Rules{Overlapping: true})
	off, _ := Derive("ovn", r, Rules{})
	if on.Spec.OverlappingRanges != "" || !Overlapping(on) {
		t.Errorf("enable_overlapping_ranges true gives %q", on.Spec.OverlappingRanges)
	}
	if off.Spec.OverlappingRanges != ipamv1.OverlappingRangesDisabled || Overlapping(off) {
		t.Errorf("enable_overlapping_ranges false gives %q", off.Spec.OverlappingRanges)
	}
}

func TestCheckDerivedFor(t *testing.T) {
	r, err := ipam.ParseRange("range", ipam.RangeSpec{Range: "10.0.0.0/24"}, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	other := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "blue-10.0.0.0-24"}, Spec: ipamv1.IPPoolSpec{Range: "10.0.0.0/25", NetworkName: "blue"}}
	err = CheckDerivedFor(other, "blue", r)
	want := `IPPool blue-10.0.0.0-24 already exists for range 10.0.0.0/25 of network "blue", not range 10.0.0.0/24 of network "blue"`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

func TestCheckReference(t *testing.T) {
	p := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: ipamv1.IPPoolSpec{Range: "10.1.0.0/24", NetworkName: "red"}}
	if err := CheckReference(p, ""); err != nil {
		t.Errorf("no network_name: %v", err)
	}
	if err := CheckReference(p, "red"); err != nil {
		t.Errorf("the pool's network_name: %v", err)
	}
	err := CheckReference(p, "blue")
	if want := `network_name "blue": differs from the networkName "red" of IPPool shared`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}
