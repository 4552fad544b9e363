package ipam

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// spacedExcludes returns n single addresses of 10.0.0.0/16, no two adjacent, so each stays a CIDR.
func spacedExcludes(n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf("10.0.%d.%d", i/100, 2*(i%100)+1)
	}
	return out
}

func TestExcludeLimit(t *testing.T) {
	tests := []struct {
		name      string
		spec      RangeSpec
		gateway   string
		wantCIDRs int
		wantError string
	}{
		{name: "exactly the limit", spec: RangeSpec{Range: "10.0.0.0/16", Exclude: spacedExcludes(MaxExclude)}, wantCIDRs: MaxExclude},
		{name: "one over the limit", spec: RangeSpec{Range: "10.0.0.0/16", Exclude: spacedExcludes(MaxExclude + 1)},
			wantError: `ipam.exclude: the exclusions make more than 256 CIDRs once merged and clipped to the window 10.0.0.1-10.0.255.254; at most 256 are allowed`},
		{name: "the gateway is not counted", gateway: "10.0.9.9", spec: RangeSpec{Range: "10.0.0.0/16", Exclude: spacedExcludes(MaxExclude)}, wantCIDRs: MaxExclude},
		{name: "entries that merge count once", spec: RangeSpec{Range: "10.0.0.0/16", Exclude: append(spacedExcludes(MaxExclude), "10.0.0.0/28")},
			wantCIDRs: MaxExclude - 8 + 4}, // .1-.15 replaces eight entries with .1, .2/31, .4/30, .8/29
		{name: "clipping to the window can make one entry several CIDRs", spec: RangeSpec{Range: "10.0.0.0/24", RangeStart: "10.0.0.5", Exclude: []string{"10.0.0.0/27"}},
			wantCIDRs: 4}, // .5, .6/31, .8/29, .16/28
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gw netip.Addr
			if tt.gateway != "" {
				gw = netip.MustParseAddr(tt.gateway)
			}
			r, err := ParseRange("ipam", tt.spec, gw)
			if tt.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantError) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := len(r.ExcludedCIDRs()); got != tt.wantCIDRs {
				t.Fatalf("%d exclusion CIDRs, want %d", got, tt.wantCIDRs)
			}
		})
	}
}

func TestExcludeLimitInAConfig(t *testing.T) {
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"n","ipam":{"type":"netpool","range":"10.0.0.0/16","exclude":["%s"]}}`,
		strings.Join(spacedExcludes(MaxExclude+1), `","`))
	_, err := Load([]byte(conf), "", nil)
	if err == nil || !strings.Contains(err.Error(), "more than 256 CIDRs") {
		t.Fatalf("err = %v, want the exclusion limit", err)
	}
}

func TestExcludedCIDRs(t *testing.T) {
	r, err := ParseRange("ipam", RangeSpec{Range: "10.0.0.0/24", Exclude: []string{"10.0.0.16/28", "10.0.0.33", "10.0.0.34"}}, netip.MustParseAddr("10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.ExcludedCIDRs(), " "); got != "10.0.0.16/28 10.0.0.33 10.0.0.34" {
		t.Fatalf("ExcludedCIDRs = %s", got)
	}
}
