package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestParseRange(t *testing.T) {
	tests := []struct {
		name      string
		spec      RangeSpec
		gateway   string
		subnet    string
		start     string
		end       string
		excluded  []Interval
		capacity  string
		wantError string
	}{
		{
			name: "IPv4 /24 skips network and broadcast", spec: RangeSpec{Range: "10.0.0.0/24"},
			subnet: "10.0.0.0/24", start: "10.0.0.1", end: "10.0.0.254", capacity: "254",
		},
		{
			name: "gateway is never handed out", spec: RangeSpec{Range: "10.0.0.0/24"}, gateway: "10.0.0.1",
			subnet: "10.0.0.0/24", start: "10.0.0.1", end: "10.0.0.254", capacity: "253",
			excluded: []Interval{{mustAddr("10.0.0.1"), mustAddr("10.0.0.1")}},
		},
		{
			name: "whereabouts A-B/nn: subnet of B, window A..B", spec: RangeSpec{Range: "192.168.2.225-192.168.2.230/28"},
			subnet: "192.168.2.224/28", start: "192.168.2.225", end: "192.168.2.230", capacity: "6",
		},
		{
			name: "host bits in range start the window there", spec: RangeSpec{Range: "10.0.0.100/24"},
			subnet: "10.0.0.0/24", start: "10.0.0.100", end: "10.0.0.254", capacity: "155",
		},
		{
			name: "range_start and range_end narrow the window", spec: RangeSpec{Range: "10.0.0.0/24", RangeStart: "10.0.0.10", RangeEnd: "10.0.0.19"},
			subnet: "10.0.0.0/24", start: "10.0.0.10", end: "10.0.0.19", capacity: "10",
		},
		{
			name: "range_start on the network address is clamped", spec: RangeSpec{Range: "10.0.0.0/24", RangeStart: "10.0.0.0", RangeEnd: "10.0.0.255"},
			subnet: "10.0.0.0/24", start: "10.0.0.1", end: "10.0.0.254", capacity: "254",
		},
		{
			name:   "unsorted overlapping exclusions merge",
			spec:   RangeSpec{Range: "10.0.0.0/24", Exclude: []string{"10.0.0.64/26", "10.0.0.5", "10.0.0.96/27", "10.0.0.4/31", "10.0.0.128/32"}},
			subnet: "10.0.0.0/24", start: "10.0.0.1", end: "10.0.0.254", capacity: "187",
			excluded: []Interval{
				{mustAddr("10.0.0.4"), mustAddr("10.0.0.5")},
				{mustAddr("10.0.0.64"), mustAddr("10.0.0.128")},
			},
		},
		{
			name: "exclusion wider than the window clips", spec: RangeSpec{Range: "10.0.0.0/24", Exclude: []string{"10.0.0.0/25"}},
			subnet: "10.0.0.0/24", start: "10.0.0.1", end: "10.0.0.254", capacity: "127",
			excluded: []Interval{{mustAddr("10.0.0.1"), mustAddr("10.0.0.127")}},
		},
		{
			name: "IPv6 /64 reaches the whole subnet, not the first /65", spec: RangeSpec{Range: "fd00::/64", Exclude: []string{"fd00::/65"}},
			subnet: "fd00::/64", start: "fd00::1", end: "fd00::ffff:ffff:ffff:ffff", capacity: "9223372036854775808",
			excluded: []Interval{{mustAddr("fd00::1"), mustAddr("fd00::7fff:ffff:ffff:ffff")}},
		},
		{
			name: "IPv6 keeps its last address", spec: RangeSpec{Range: "fd00::/120"},
			subnet: "fd00::/120", start: "fd00::1", end: "fd00::ff", capacity: "255",
		},
		{
			name: "IPv4 /31 is point-to-point", spec: RangeSpec{Range: "10.0.0.0/31"},
			subnet: "10.0.0.0/31", start: "10.0.0.0", end: "10.0.0.1", capacity: "2",
		},
		{name: "missing range", spec: RangeSpec{}, wantError: `ipam.range: a range is required`},
		{name: "bad CIDR", spec: RangeSpec{Range: "10.0.0.0/33"}, wantError: `ipam.range "10.0.0.0/33": not a CIDR`},
		{name: "garbage", spec: RangeSpec{Range: "banana"}, wantError: `ipam.range "banana": not a CIDR`},
		{name: "mixed families in A-B/nn", spec: RangeSpec{Range: "10.0.0.1-fd00::5/64"}, wantError: `different address families`},
		{name: "bad start of A-B/nn", spec: RangeSpec{Range: "x-10.0.0.5/24"}, wantError: `the part before '-' is not an IP address`},
		{name: "A-B without prefix", spec: RangeSpec{Range: "10.0.0.1-10.0.0.5"}, wantError: `(B/nn)`},
		{name: "range_start outside", spec: RangeSpec{Range: "10.0.0.0/24", RangeStart: "10.0.1.5"}, wantError: `ipam.range_start "10.0.1.5": is outside range 10.0.0.0/24`},
		{name: "range_end of other family", spec: RangeSpec{Range: "10.0.0.0/24", RangeEnd: "fd00::1"}, wantError: `ipam.range_end "fd00::1": is not of the same address family`},
		{name: "range_end unparsable", spec: RangeSpec{Range: "10.0.0.0/24", RangeEnd: "10.0.0"}, wantError: `ipam.range_end "10.0.0": not an IP address`},
		{name: "reversed window", spec: RangeSpec{Range: "10.0.0.0/24", RangeStart: "10.0.0.50", RangeEnd: "10.0.0.40"}, wantError: `ipam.range_start "10.0.0.50": is after range_end 10.0.0.40`},
		{name: "unparsable exclude", spec: RangeSpec{Range: "10.0.0.0/24", Exclude: []string{"10.0.0.0/40"}}, wantError: `ipam.exclude[0] "10.0.0.0/40": not a CIDR or IP address`},
		{name: "exclude of other family", spec: RangeSpec{Range: "10.0.0.0/24", Exclude: []string{"10.0.0.7", "fd00::/64"}}, wantError: `ipam.exclude[1] "fd00::/64": is not of the same address family`},
		{name: "zone in range", spec: RangeSpec{Range: "fe80::%eth0/64"}, wantError: `not a CIDR`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gw netip.Addr
			if tt.gateway != "" {
				gw = mustAddr(tt.gateway)
			}
			r, err := ParseRange("ipam", tt.spec, gw)
			if tt.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantError) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantError)
				}
				if !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got := r.Subnet.String(); got != tt.subnet {
				t.Errorf("subnet = %s, want %s", got, tt.subnet)
			}
			if r.Start != mustAddr(tt.start) || r.End != mustAddr(tt.end) {
				t.Errorf("window = %s-%s, want %s-%s", r.Start, r.End, tt.start, tt.end)
			}
			if got := r.Capacity().String(); got != tt.capacity {
				t.Errorf("capacity = %s, want %s", got, tt.capacity)
			}
			if tt.excluded != nil && !equalIntervals(r.Excluded, tt.excluded) {
				t.Errorf("excluded = %v, want %v", r.Excluded, tt.excluded)
			}
		})
	}
}

func equalIntervals(a, b []Interval) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestNextAllowed(t *testing.T) {
	r, err := ParseRange("ipam", RangeSpec{Range: "10.0.0.0/24", RangeEnd: "10.0.0.200", Exclude: []string{"10.0.0.10/31", "10.0.0.12", "10.0.0.200"}}, mustAddr("10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ from, want string }{
		{"10.0.0.0", "10.0.0.2"}, // network address, then the gateway
		{"10.0.0.1", "10.0.0.2"},
		{"10.0.0.9", "10.0.0.9"},
		{"10.0.0.10", "10.0.0.13"}, // .10/31 and .12 merged into one exclusion: one jump
		{"10.0.0.199", "10.0.0.199"},
		{"10.0.0.200", ""}, // excluded and last of the window
		{"10.0.0.254", ""},
	}
	for _, tt := range tests {
		got, ok := r.NextAllowed(mustAddr(tt.from))
		if tt.want == "" {
			if ok {
				t.Errorf("NextAllowed(%s) = %s, want none", tt.from, got)
			}
			continue
		}
		if !ok || got != mustAddr(tt.want) {
			t.Errorf("NextAllowed(%s) = %v %v, want %s", tt.from, got, ok, tt.want)
		}
	}
}

func TestAllowedReasons(t *testing.T) {
	r, err := ParseRange("ipam", RangeSpec{Range: "10.0.0.0/24", RangeStart: "10.0.0.10", RangeEnd: "10.0.0.100", Exclude: []string{"10.0.0.50"}}, mustAddr("10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ addr, want string }{
		{"10.0.0.20", ""},
		{"10.0.1.5", "10.0.1.5 is outside range 10.0.0.0/24"},
		{"10.0.0.1", "10.0.0.1 is the gateway of range 10.0.0.0/24"},
		{"10.0.0.0", "10.0.0.0 is the network or broadcast address of range 10.0.0.0/24"},
		{"10.0.0.255", "10.0.0.255 is the network or broadcast address of range 10.0.0.0/24"},
		{"10.0.0.5", "10.0.0.5 is outside the window 10.0.0.10-10.0.0.100 of range 10.0.0.0/24"},
		{"10.0.0.50", "10.0.0.50 is excluded from range 10.0.0.0/24 by 10.0.0.50-10.0.0.50"},
	}
	for _, tt := range tests {
		err := r.Allowed(mustAddr(tt.addr))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Allowed(%s) = %v, want nil", tt.addr, err)
		case tt.want != "" && (err == nil || err.Error() != tt.want):
			t.Errorf("Allowed(%s) = %v, want %q", tt.addr, err, tt.want)
		}
	}
}

func TestExhaustionAtCapacity(t *testing.T) {
	// Walking NextAllowed from the start visits exactly Capacity addresses, whatever the exclusions.
	for _, spec := range []RangeSpec{
		{Range: "10.0.0.0/26", Exclude: []string{"10.0.0.8/29", "10.0.0.33", "10.0.0.34"}},
		{Range: "fd00::10-fd00::40/64", Exclude: []string{"fd00::20/124", "fd00::3f"}},
	} {
		r, err := ParseRange("ipam", spec, netip.Addr{})
		if err != nil {
			t.Fatal(err)
		}
		n := int64(0)
		for a, ok := r.NextAllowed(r.Start); ok; a, ok = r.NextAllowed(a.Next()) {
			n++
		}
		if want := r.Capacity().Int64(); n != want {
			t.Errorf("%s: walked %d addresses, capacity says %d", spec.Range, n, want)
		}
	}
}

func TestLastOf(t *testing.T) {
	for p, want := range map[string]string{
		"10.0.0.0/24": "10.0.0.255", "10.0.0.0/8": "10.255.255.255", "0.0.0.0/0": "255.255.255.255",
		"fd00::/64": "fd00::ffff:ffff:ffff:ffff", "fd00::/48": "fd00:0:0:ffff:ffff:ffff:ffff:ffff", "10.1.2.3/32": "10.1.2.3",
	} {
		if got := LastOf(netip.MustParsePrefix(p)); got != mustAddr(want) {
			t.Errorf("LastOf(%s) = %s, want %s", p, got, want)
		}
	}
}

func TestIntervalCIDRStrings(t *testing.T) {
	for _, tt := range []struct{ first, last, want string }{
		{"10.0.0.5", "10.0.0.5", "[10.0.0.5]"},
		{"10.0.0.0", "10.0.0.255", "[10.0.0.0/24]"},
		{"10.0.0.1", "10.0.0.6", "[10.0.0.1 10.0.0.2/31 10.0.0.4/31 10.0.0.6]"},
		{"10.0.0.1", "10.0.0.10", "[10.0.0.1 10.0.0.2/31 10.0.0.4/30 10.0.0.8/31 10.0.0.10]"},
		{"fd00::ff", "fd00::100", "[fd00::ff fd00::100]"},
		{"fd00::", "fd00::ffff:ffff:ffff:ffff", "[fd00::/64]"},
		{"0.0.0.0", "255.255.255.255", "[0.0.0.0/0]"},
	} {
		got := fmt.Sprint(Interval{mustAddr(tt.first), mustAddr(tt.last)}.CIDRStrings())
		if got != tt.want {
			t.Errorf("CIDRStrings(%s-%s) = %s, want %s", tt.first, tt.last, got, tt.want)
		}
	}
	first, last := UsableBounds(netip.MustParsePrefix("10.0.0.7/24"))
	if first != mustAddr("10.0.0.1") || last != mustAddr("10.0.0.254") {
		t.Errorf("UsableBounds = %s-%s", first, last)
	}
}
