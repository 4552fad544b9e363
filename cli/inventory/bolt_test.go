package inventory

import (
	"net/netip"
	"testing"

	"github.com/netpool/netpool/ipam"
)

// TestNetworkOf: the network name comes back out of every pool key ipam.PoolKey makes.
func TestNetworkOf(t *testing.T) {
	for _, tc := range []struct{ network, subnet string }{
		{"", "10.0.0.0/24"}, {"", "fd00::/64"}, {"tenant-a", "10.0.0.0/24"}, {"tenant-a", "fd00:1::/120"},
		{"a.b.example", "192.168.0.0/16"}, {"", "::/0"},
	} {
		key := ipam.PoolKey(tc.network, netip.MustParsePrefix(tc.subnet))
		if got := networkOf(key); got != tc.network {
			t.Errorf("networkOf(%q) = %q, want %q", key, got, tc.network)
		}
	}
	for _, key := range []string{"", "nonsense", "x/y"} {
		if got := networkOf(key); got != "" {
			t.Errorf("networkOf(%q) = %q, want none", key, got)
		}
	}
}
