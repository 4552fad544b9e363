package kubestore

import (
	"net/netip"
	"strings"
	"testing"
)

func TestGeometry(t *testing.T) {
	tests := []struct {
		subnet    string
		sliceSize int32
		bits      int
		addr      string
		index     uint64
		block     string
	}{
		{"10.0.0.0/20", 0, 26, "10.0.5.7", 20, "10.0.5.0/26"},
		{"10.0.0.0/24", 0, 28, "10.0.0.255", 15, "10.0.0.240/28"},
		// Small pools: never a default block below 16 addresses; a range of 16 or fewer is one block.
		{"10.0.0.0/26", 0, 28, "10.0.0.50", 3, "10.0.0.48/28"},
		{"10.0.0.0/27", 0, 28, "10.0.0.17", 1, "10.0.0.16/28"},
		{"10.0.0.0/28", 0, 28, "10.0.0.9", 0, "10.0.0.0/28"},
		{"10.0.0.0/29", 0, 29, "10.0.0.6", 0, "10.0.0.0/29"},
		{"10.0.0.0/31", 0, 31, "10.0.0.1", 0, "10.0.0.0/31"},
		{"10.0.0.9/32", 0, 32, "10.0.0.9", 0, "10.0.0.9/32"},
		{"fd00::/124", 0, 124, "fd00::9", 0, "fd00::/124"},
		{"fd00::/122", 0, 124, "fd00::39", 3, "fd00::30/124"},
		{"10.0.0.0/28", 32, 32, "10.0.0.9", 9, "10.0.0.9/32"},
		{"10.0.0.0/8", 0, 26, "10.255.255.254", 262143, "10.255.255.192/26"},
		{"10.0.0.0/24", 24, 24, "10.0.0.77", 0, "10.0.0.0/24"},
		{"10.0.0.0/24", 30, 30, "10.0.0.77", 19, "10.0.0.76/30"},
		{"fd00::/64", 0, 122, "fd00::1:0:0:41", 1<<42 + 1, "fd00::1:0:0:40/122"},
		{"fd00::/48", 0, 111, "fd00:0:0:1::", 1 << 47, "fd00:0:0:1::/111"},
		{"::/0", 0, 63, "8000::1", 1 << 62, "8000::/63"},
		{"fd00::/64", 128, 128, "fd00::ffff:ffff:ffff:ffff", 1<<64 - 1, "fd00::ffff:ffff:ffff:ffff/128"},
	}
	for _, tt := range tests {
		t.Run(tt.subnet+"/"+tt.addr, func(t *testing.T) {
			g, err := newGeometry(netip.MustParsePrefix(tt.subnet), tt.sliceSize)
			if err != nil {
				if tt.bits-netip.MustParsePrefix(tt.subnet).Bits() <= maxSliceIndexBits {
					t.Fatal(err)
				}
				return
			}
			if g.bits != tt.bits {
				t.Errorf("bits = %d, want %d", g.bits, tt.bits)
			}
			i := g.index(netip.MustParseAddr(tt.addr))
			if i != tt.index {
				t.Errorf("index(%s) = %d, want %d", tt.addr, i, tt.index)
			}
			if b := g.block(i); b.String() != tt.block || !b.Contains(netip.MustParseAddr(tt.addr)) {
				t.Errorf("block(%d) = %s, want %s", i, b, tt.block)
			}
		})
	}
}

func TestGeometryErrors(t *testing.T) {
	for _, tt := range []struct {
		subnet string
		size   int32
		want   string
	}{
		{"10.0.0.0/24", 23, "sliceSize 23 does not fit range 10.0.0.0/24 (want 24 to 32)"},
		{"10.0.0.0/24", 33, "sliceSize 33 does not fit range"},
		{"fd00::/48", 120, "sliceSize 120 carves range fd00::/48 into more than 2^63 slices (want at most 111)"},
	} {
		_, err := newGeometry(netip.MustParsePrefix(tt.subnet), tt.size)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("newGeometry(%s, %d) = %v, want %q", tt.subnet, tt.size, err, tt.want)
		}
	}
}
