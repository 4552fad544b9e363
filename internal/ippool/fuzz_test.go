package ippool

import (
	"net/netip"
	"strings"
	"testing"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// FuzzDeriveRoundTrip checks the mapping both ways: any range a config describes derives a pool
// that parses back to the same window, exclusions and capacity, within the exclusion limit; and
// any spec either parses or fails with an error naming a spec field, never panicking.
func FuzzDeriveRoundTrip(f *testing.F) {
	for _, s := range []struct{ rng, start, end, exclude, gateway string }{
		{"10.0.0.0/24", "", "", "", ""},
		{"10.0.0.0/24", "10.0.0.10", "10.0.0.100", "10.0.0.16/28,10.0.0.33", "10.0.0.1"},
		{"10.0.0.5-10.0.0.50/24", "", "", "", ""},
		{"fd00::/120", "", "", "fd00::10/124", "fd00::1"},
		{"10.0.0.0/31", "", "", "", ""},
		{"fd00::/64", "fd00::1:1", "", "fd00::/64", ""},
		{"10.0.0.0/33", "", "", "", "gw"},
	} {
		f.Add(s.rng, s.start, s.end, s.exclude, s.gateway)
	}
	f.Fuzz(func(t *testing.T, rng, start, end, exclude, gateway string) {
		var ex []string
		if exclude != "" {
			ex = strings.Split(exclude, ",")
		}
		spec := ipamv1.IPPoolSpec{Range: rng, RangeStart: start, RangeEnd: end, Exclude: ex, Gateway: gateway}
		if _, err := Parse(&ipamv1.IPPool{Spec: spec}); err != nil && !strings.HasPrefix(err.Error(), "spec.") {
			t.Fatalf("Parse error names no spec field: %v", err)
		}
		var gw netip.Addr
		if a, err := netip.ParseAddr(gateway); err == nil {
			gw = a
		}
		r, err := ipam.ParseRange("ipam", ipam.RangeSpec{Range: rng, RangeStart: start, RangeEnd: end, Exclude: ex}, gw)
		if err != nil {
			return
		}
		p, err := Derive("n", r, Rules{Overlapping: true})
		if err != nil {
			t.Fatalf("Derive of a parsed range: %v", err)
		}
		if len(p.Spec.Exclude) > MaxExclude {
			t.Fatalf("%d exclusions derived, over the limit %d", len(p.Spec.Exclude), MaxExclude)
		}
		back, err := Parse(p)
		if err != nil {
			t.Fatalf("the derived pool %+v does not parse: %v", p.Spec, err)
		}
		if back.Range.Start != r.Start || back.Range.End != r.End || back.Range.Gateway != r.Gateway ||
			back.Capacity().Cmp(r.Capacity()) != 0 {
			t.Fatalf("round trip: %s-%s gw %s (%s) became %s-%s gw %s (%s)", r.Start, r.End, r.Gateway, r.Capacity(),
				back.Range.Start, back.Range.End, back.Range.Gateway, back.Capacity())
		}
		if err := CheckDerivedFor(p, "n", r); err != nil {
			t.Fatal(err)
		}
	})
}
