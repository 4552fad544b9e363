package ipam

import (
	"errors"
	"net/netip"
	"testing"
)

// FuzzLoad checks that any input either loads into a self-consistent config or fails with a
// typed config error; it never panics.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		`{"name":"n","ipam":{"type":"netpool","range":"10.0.0.0/24"}}`,
		`{"name":"n","ipam":{"type":"netpool","range":"192.168.2.225-192.168.2.230/28","exclude":["192.168.2.229/32"],"gateway":"192.168.2.225"}}`,
		`{"name":"n","ipam":{"type":"netpool","ipRanges":[{"range":"fd00::/64","range_start":"fd00::10"},{"range":"10.0.0.0/8"}]}}`,
		`{"name":"n","runtimeConfig":{"ips":["10.0.0.5/24"]},"ipam":{"type":"netpool","range":"10.0.0.0/24"}}`,
		`{"ipam":{"range":"10.0.0.0/24","range_start":"10.0.0.50","range_end":"10.0.0.40"}}`,
		`{"ipam":{"range":"fd00::/48","exclude":["fd00::/49","fd00:0:0:8000::5"]}}`,
		`{"name":"n","ipam":{"type":"netpool","range":"10.0.0.0/24","reuseCooldown":"30s"}}`,
		`{"name":"n","ipam":{"type":"netpool","datastore":"kubernetes","range":"10.0.0.0/24","allowPersistentIPs":true}}`,
		`{"name":"n","ipam":{"type":"netpool","range":"10.0.0.0/24","allowPersistentIPs":true}}`,
		`{"name":"n","ipam":{"type":"netpool","datastore":"kubernetes","range":"10.0.0.0/24","allowPersistentIPs":"yes"}}`,
		`{"name":"n","allowPersistentIPs":true,"ipam":{"type":"netpool","datastore":"kubernetes","range":"10.0.0.0/24"}}`,
		`{"name":"n","allowPersistentIPs":false,"ipam":{"type":"netpool","datastore":"kubernetes","range":"10.0.0.0/24","allowPersistentIPs":true}}`,
		`{"name":"n","allowPersistentIPs":1,"ipam":{"type":"netpool","range":"10.0.0.0/24"}}`,
		`{"name":"n","ipam":{"type":"netpool","range":"10.0.0.0/24","statefulSets":"Sticky"}}`,
		`{"name":"n","ipam":{"type":"netpool","datastore":"kubernetes","pool":"db","statefulSets":"None"}}`,
		`{"name":"n","ipam":{"type":"netpool","range":"10.0.0.0/24","statefulSets":"sticky"}}`,
		`{"ipam":null}`, `[]`, `{"ipam":{"range":"1.2.3.4/0"}}`,
	} {
		f.Add([]byte(seed), "IP=10.0.0.5")
	}
	f.Fuzz(func(t *testing.T, conf []byte, args string) {
		c, err := Load(conf, args, nil)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		for _, r := range c.Ranges {
			if r.Start.Compare(r.End) > 0 || !r.Subnet.Contains(r.Start) || !r.Subnet.Contains(r.End) {
				t.Fatalf("window %s-%s not inside %s", r.Start, r.End, r.Subnet)
			}
			if a, ok := r.NextAllowed(r.Start); ok && r.Allowed(a) != nil {
				t.Fatalf("NextAllowed gave %s, which Allowed rejects: %v", a, r.Allowed(a))
			}
		}
	})
}

// FuzzRangeMath checks NextAllowed against Allowed on arbitrary ranges and probe addresses: the
// answer is allowed, no allowed address is skipped, and exclusions stay merged.
func FuzzRangeMath(f *testing.F) {
	f.Add("10.0.0.0/24", "10.0.0.8/29", "10.0.0.1", uint16(3))
	f.Add("10.0.0.0/30", "10.0.0.2", "", uint16(0))
	f.Add("fd00::/64", "fd00::/65", "fd00::1", uint16(9))
	f.Add("192.168.2.225-192.168.2.230/28", "192.168.2.226", "192.168.2.225", uint16(1))
	f.Fuzz(func(t *testing.T, rng, exclude, gateway string, probe uint16) {
		var gw netip.Addr
		if g, err := netip.ParseAddr(gateway); err == nil {
			gw = g
		}
		r, err := ParseRange("ipam", RangeSpec{Range: rng, Exclude: []string{exclude}}, gw)
		if err != nil {
			return
		}
		for i := 1; i < len(r.Excluded); i++ {
			if r.Excluded[i-1].Last.Next().Compare(r.Excluded[i].First) >= 0 {
				t.Fatalf("exclusions not merged: %v", r.Excluded)
			}
		}
		a := r.Start
		for range int(probe % 64) {
			if n := a.Next(); n.IsValid() {
				a = n
			}
		}
		got, ok := r.NextAllowed(a)
		if !ok {
			return
		}
		if err := r.Allowed(got); err != nil {
			t.Fatalf("NextAllowed(%s) = %s, not allowed: %v", a, got, err)
		}
		// An IPv6 jump can cross 2^63 addresses: check the first few skipped and the last one.
		for b, n := a, 0; b.Compare(got) < 0 && n < 256; b, n = b.Next(), n+1 {
			if r.Allowed(b) == nil {
				t.Fatalf("NextAllowed(%s) = %s skipped allowed %s", a, got, b)
			}
		}
		if prev := got.Prev(); got.Compare(a) > 0 && r.Allowed(prev) == nil {
			t.Fatalf("NextAllowed(%s) = %s skipped allowed %s", a, got, prev)
		}
	})
}
