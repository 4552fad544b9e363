package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// mustValidName stops the test when name is not a valid object name.
func mustValidName(t *testing.T, name string) {
	t.Helper()
	if errs := validation.IsDNS1123Subdomain(name); len(errs) != 0 {
		t.Fatalf("%q (%d characters) is not a DNS-1123 subdomain: %v", name, len(name), errs)
	}
}

func TestPoolName(t *testing.T) {
	long := strings.Repeat("n", 300)
	tests := []struct {
		name    string
		network string
		subnet  string
		want    string
	}{
		{name: "IPv4 without a network", subnet: "10.0.0.0/24", want: "10.0.0.0-24"},
		{name: "IPv4 with a network", network: "net1", subnet: "10.0.0.0/24", want: "net1-10.0.0.0-24"},
		{name: "host bits are masked", subnet: "10.0.0.5/24", want: "10.0.0.0-24"},
		{name: "IPv6", subnet: "fd00::/64", want: "fd00---64"},
		{name: "IPv6 full", subnet: "fd00:1:2:3:4:5:6:0/112", want: "fd00-1-2-3-4-5-6-0-112"},
		{name: "IPv6 with a network", network: "blue", subnet: "2001:db8::/48", want: "blue-2001-db8---48"},
		{name: "IPv6 default route starts with a digit", subnet: "::/0", want: "0---0"},
		{name: "IPv4 default route", subnet: "0.0.0.0/0", want: "0.0.0.0-0"},
		{name: "network is lowercased", network: "Net1", subnet: "10.0.0.0/8", want: "net1-10.0.0.0-8"},
		{name: "invalid characters become dashes", network: "my_net/a b", subnet: "10.0.0.0/8", want: "my-net-a-b-10.0.0.0-8"},
		{name: "network starting with a dash gets a zero", network: "-x", subnet: "10.0.0.0/8", want: "0-x-10.0.0.0-8"},
		{name: "network with empty dot parts", network: "a..b.", subnet: "10.0.0.0/8", want: "a.0.b.0-10.0.0.0-8"},
		{name: "non-ASCII network", network: "réseau", subnet: "10.0.0.0/8", want: "r-seau-10.0.0.0-8"},
		{name: "invalid subnet", want: "invalid-prefix"},
		{
			name:    "too long is cut and hashed",
			network: long,
			subnet:  "10.0.0.0/24",
			want:    strings.Repeat("n", 242) + "-" + hashOf(long+"-10.0.0.0-24"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var subnet netip.Prefix
			if tt.subnet != "" {
				subnet = netip.MustParsePrefix(tt.subnet)
			}
			got := PoolName(tt.network, subnet)
			if got != tt.want {
				t.Fatalf("PoolName(%q, %s) = %q, want %q", tt.network, tt.subnet, got, tt.want)
			}
			mustValidName(t, got)
		})
	}
}

func TestPoolNameDistinguishesLongNetworks(t *testing.T) {
	subnet := netip.MustParsePrefix("10.0.0.0/24")
	a := PoolName(strings.Repeat("a", 300)+"x", subnet)
	b := PoolName(strings.Repeat("a", 300)+"y", subnet)
	if a == b {
		t.Fatalf("two long networks that differ at the end share the pool name %q", a)
	}
	if len(a) != maxNameLength {
		t.Fatalf("shortened name has %d characters, want %d", len(a), maxNameLength)
	}
}

func TestReservationName(t *testing.T) {
	long := strings.Repeat("s", 300)
	v6max := "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
	tests := []struct {
		name  string
		scope string
		addr  string
		want  string
	}{
		{name: "IPv4 without a scope", addr: "10.0.0.7", want: "10.0.0.7"},
		{name: "IPv4 with a scope", scope: "net1", addr: "10.0.0.7", want: "net1.10.0.0.7"},
		{name: "IPv6", addr: "fd00::7", want: "fd00--7"},
		{name: "IPv6 ending in :: gets a zero as in whereabouts", addr: "fd00::", want: "fd00--0"},
		{name: "IPv6 starting with :: gets a zero", addr: "::1", want: "0--1"},
		{name: "IPv6 unspecified", addr: "::", want: "0--0"},
		{name: "IPv6 in canonical lowercase", addr: "FD00:0:0::AB", want: "fd00--ab"},
		{name: "IPv6 zone is dropped", addr: "fe80::1%eth0", want: "fe80--1"},
		{name: "IPv4-mapped IPv6 keeps its form", addr: "::ffff:10.0.0.1", want: "0--ffff-10.0.0.1"},
		{name: "IPv6 with a scope", scope: "blue", addr: "2001:db8::1", want: "blue.2001-db8--1"},
		{name: "scope is normalised", scope: "Blue_Net", addr: "10.0.0.1", want: "blue-net.10.0.0.1"},
		{name: "scope ending with a dash", scope: "net-", addr: "10.0.0.1", want: "net-0.10.0.0.1"},
		{name: "invalid address", want: "invalid-ip"},
		{
			name:  "too long scope is cut and hashed, address kept whole",
			scope: long,
			addr:  v6max,
			want:  strings.Repeat("s", 253-1-39-11) + "-" + hashOf(long) + ".ffff-ffff-ffff-ffff-ffff-ffff-ffff-ffff",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var addr netip.Addr
			if tt.addr != "" {
				addr = netip.MustParseAddr(tt.addr)
			}
			got := ReservationName(tt.scope, addr)
			if got != tt.want {
				t.Fatalf("ReservationName(%q, %s) = %q, want %q", tt.scope, tt.addr, got, tt.want)
			}
			mustValidName(t, got)
		})
	}
}

func TestReservationNameIsPerAddressAndScope(t *testing.T) {
	a := netip.MustParseAddr("10.0.0.1")
	b := netip.MustParseAddr("10.0.0.2")
	if ReservationName("", a) == ReservationName("", b) {
		t.Fatal("two addresses share a reservation name")
	}
	if ReservationName("red", a) == ReservationName("blue", a) {
		t.Fatal("one address in two scopes shares a reservation name")
	}
	if ReservationName("", a) == ReservationName("red", a) {
		t.Fatal("the unnamed scope and a named one share a reservation name")
	}
}

func TestSliceName(t *testing.T) {
	long := strings.Repeat("p", 253)
	tests := []struct {
		name  string
		pool  string
		index uint64
		want  string
	}{
		{name: "first block", pool: "10.0.0.0-16", index: 0, want: "10.0.0.0-16.0"},
		{name: "later block", pool: "net1-fd00---48", index: 4095, want: "net1-fd00---48.4095"},
		{name: "largest index", pool: "p", index: ^uint64(0), want: "p.18446744073709551615"},
		{name: "pool name is normalised", pool: "Pool_A", index: 1, want: "pool-a.1"},
		{
			name:  "too long pool is cut and hashed",
			pool:  long,
			index: 12,
			want:  strings.Repeat("p", 253-3-11) + "-" + hashOf(long) + ".12",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SliceName(tt.pool, tt.index)
			if got != tt.want {
				t.Fatalf("SliceName(%q, %d) = %q, want %q", tt.pool, tt.index, got, tt.want)
			}
			mustValidName(t, got)
		})
	}
}

func TestLabelValue(t *testing.T) {
	at63 := strings.Repeat("a", 63)
	long := strings.Repeat("a", 60) + ".b-c"
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "empty", in: "", want: ""},
		{name: "short name as is", in: "node-1.example.com", want: "node-1.example.com"},
		{name: "63 characters as is", in: at63, want: at63},
		{name: "longer is cut and hashed", in: long, want: strings.Repeat("a", 52) + "-" + hashOf(long)},
		{name: "cut drops a trailing dot", in: strings.Repeat("a", 51) + "." + strings.Repeat("b", 20), want: strings.Repeat("a", 51) + "-" + hashOf(strings.Repeat("a", 51)+"."+strings.Repeat("b", 20))},
		{name: "invalid characters are rewritten", in: "Node_1", want: "node-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := LabelValue(tt.in)
			if got != tt.want {
				t.Fatalf("LabelValue(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if errs := validation.IsValidLabelValue(got); len(errs) != 0 {
				t.Fatalf("%q is not a valid label value: %v", got, errs)
			}
		})
	}
}

// FuzzNames checks that every derived name is a valid object name, and every label value a valid
// label value, whatever the input.
func FuzzNames(f *testing.F) {
	f.Add("net1", "10.0.0.0/24", "10.0.0.7", uint64(3))
	f.Add("", "::/0", "::", uint64(0))
	f.Add("-.-", "fd00::/64", "fd00::", ^uint64(0))
	f.Add(strings.Repeat("é.", 200), "255.255.255.255/32", "fe80::1%eth0", uint64(1))
	f.Fuzz(func(t *testing.T, network, prefix, addr string, index uint64) {
		p, _ := netip.ParsePrefix(prefix) // an invalid prefix is a case too
		a, _ := netip.ParseAddr(addr)     // as is an invalid address
		pool := PoolName(network, p)
		mustValidName(t, pool)
		mustValidName(t, ReservationName(network, a))
		mustValidName(t, SliceName(network, index))
		mustValidName(t, SliceName(pool, index))
		for _, v := range []string{network, pool} {
			if errs := validation.IsValidLabelValue(LabelValue(v)); len(errs) != 0 {
				t.Fatalf("LabelValue(%q) = %q is not a valid label value: %v", v, LabelValue(v), errs)
			}
		}
	})
}

// hashOf is the suffix a shortened name gets: the first ten hex digits of the SHA-256 of the
// whole normalised name.
func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:10]
}
