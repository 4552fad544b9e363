package ipam

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

func TestLoadLimits(t *testing.T) {
	manyRanges := func(n int) string {
		specs := make([]RangeSpec, n)
		for i := range specs {
			specs[i] = RangeSpec{Range: fmt.Sprintf("10.%d.%d.0/24", i/256, i%256)}
		}
		b, err := json.Marshal(specs)
		if err != nil {
			t.Fatal(err)
		}
		return `{"ipam":{"type":"netpool","ipRanges":` + string(b) + `}}`
	}
	tests := []struct{ name, conf, want string }{
		{"50000 ranges", manyRanges(50000), `ipRanges "50000 ranges": at most 64 ranges`},
		{"65 ranges", manyRanges(MaxRanges + 1), `ipRanges "65 ranges": at most 64 ranges`},
		{"lock timeout 1ns", `{"ipam":{"type":"netpool","range":"10.0.0.0/24","bbolt":{"lock_timeout":"1ns"}}}`, `bbolt.lock_timeout "1ns": want a duration from 10ms to 5m0s`},
		{"lock timeout 9ms", `{"ipam":{"type":"netpool","range":"10.0.0.0/24","bbolt":{"lock_timeout":"9ms"}}}`, `bbolt.lock_timeout "9ms": want a duration from 10ms`},
		{"lock timeout 1h", `{"ipam":{"type":"netpool","range":"10.0.0.0/24","bbolt":{"lock_timeout":"1h"}}}`, `bbolt.lock_timeout "1h": want a duration from 10ms to 5m0s`},
		{"network name too long", `{"ipam":{"type":"netpool","range":"10.0.0.0/24","network_name":"` + strings.Repeat("n", MaxNetworkNameLen+1) + `"}}`, `longer than 253 bytes`},
		{"overlap found after sorting", `{"ipam":{"type":"netpool","ipRanges":[{"range":"10.0.9.0/24"},{"range":"fd00::/64"},{"range":"10.0.1.0/24"},{"range":"10.0.0.0/16"}]}}`, `ipRanges[3].range "10.0.0.0/16": overlaps ipRanges[2] (10.0.1.0/24)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load([]byte(tt.conf), "", nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
		})
	}
}

func TestLoadAtLimits(t *testing.T) {
	specs := make([]RangeSpec, MaxRanges)
	for i := range specs {
		specs[i] = RangeSpec{Range: fmt.Sprintf("10.0.%d.0/24", i)}
	}
	b, _ := json.Marshal(specs)
	conf := `{"ipam":{"type":"netpool","network_name":"` + strings.Repeat("n", MaxNetworkNameLen) +
		`","bbolt":{"lock_timeout":"10ms"},"ipRanges":` + string(b) + `}}`
	c, err := Load([]byte(conf), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Ranges) != MaxRanges || c.LockTimeout != MinLockTimeout {
		t.Errorf("loaded %d ranges, lock timeout %v", len(c.Ranges), c.LockTimeout)
	}
}

// TestFirstOverlapMatchesPairwise checks the sort-and-sweep against comparing every pair, on
// random mixes of nested, disjoint and dual-stack subnets.
func TestFirstOverlapMatchesPairwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		n := 1 + rng.IntN(8)
		ranges := make([]Range, n)
		for i := range ranges {
			if rng.IntN(4) == 0 {
				a := netip.AddrFrom16([16]byte{0xfd, 0, 15: byte(rng.IntN(4))})
				ranges[i].Subnet = netip.PrefixFrom(a, 120+rng.IntN(9)).Masked()
			} else {
				a := netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(4)), byte(rng.IntN(256))})
				ranges[i].Subnet = netip.PrefixFrom(a, 22+rng.IntN(11)).Masked()
			}
		}
		wantAny := false
		for i := range ranges {
			for j := range i {
				wantAny = wantAny || ranges[i].Subnet.Overlaps(ranges[j].Subnet)
			}
		}
		j, i, got := firstOverlap(ranges)
		if got != wantAny {
			t.Fatalf("round %d: firstOverlap(%v) = %v, pairwise says %v", round, subnets(ranges), got, wantAny)
		}
		if got && (j >= i || !ranges[i].Subnet.Overlaps(ranges[j].Subnet)) {
			t.Fatalf("round %d: firstOverlap(%v) named %d and %d, which do not overlap", round, subnets(ranges), j, i)
		}
	}
}

func subnets(rs []Range) []netip.Prefix {
	out := make([]netip.Prefix, len(rs))
	for i, r := range rs {
		out[i] = r.Subnet
	}
	return out
}

// BenchmarkLoadMaxRanges is the cost of loading a config at the range limit: the plugin, the
// agent and the controller pay it on every load.
func BenchmarkLoadMaxRanges(b *testing.B) {
	specs := make([]RangeSpec, MaxRanges)
	for i := range specs {
		specs[i] = RangeSpec{Range: fmt.Sprintf("10.%d.0.0/16", i)}
	}
	raw, _ := json.Marshal(specs)
	conf := netConf(`{"type":"netpool","ipRanges":` + string(raw) + `}`)
	for b.Loop() {
		if _, err := Load(conf, "", nil); err != nil {
			b.Fatal(err)
		}
	}
}
