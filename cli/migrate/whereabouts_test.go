package migrate

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParsePool(t *testing.T) {
	p, err := parsePool([]byte(`{"metadata":{"namespace":"kube-system","name":"n-10.0.0.0-24"},"spec":{"range":"10.0.0.0/24","allocations":{
		"5":{"id":"c5","podref":"ns/p5","ifname":"net1"},
		"2":{"id":"c2","podref":"ns/p2","ifname":"net1"},
		"256":{"id":"c","podref":"ns/p","ifname":"net1"},
		"-1":{"id":"c","podref":"ns/p","ifname":"net1"},
		"1e3":{"id":"c","podref":"ns/p","ifname":"net1"},
		"7":{"id":"","podref":"ns/p","ifname":"net1"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Allocations) != 2 || p.Allocations[0].Addr.String() != "10.0.0.2" || p.Allocations[1].Addr.String() != "10.0.0.5" ||
		p.Allocations[1].ContainerID != "c5" || p.Allocations[1].PodRef != "ns/p5" {
		t.Fatalf("allocations %+v", p.Allocations)
	}
	want := []string{
		`allocation "-1": the key is not a decimal offset`,
		`allocation "1e3": the key is not a decimal offset`,
		`allocation "256": offset 256 lies outside range 10.0.0.0/24`,
		`allocation "7" (10.0.0.7): id, podref and ifname are all needed`,
	}
	if len(p.Problems) != len(want) {
		t.Fatalf("problems %+v, want %d", p.Problems, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(p.Problems[i].Reason, w) {
			t.Errorf("problem %d = %q, want %q", i, p.Problems[i].Reason, w)
		}
	}
	for _, bad := range []struct{ json, want string }{
		{`[]`, "cannot decode a whereabouts IPPool"},
		{`{"metadata":{"namespace":"a","name":"b"},"spec":{"range":"10.0.0.0"}}`, `spec.range "10.0.0.0" is not a CIDR`},
		{`{"spec":{"range":"10.0.0.0/24","allocations":{"1":{"id":7}}}}`, "cannot decode"},
	} {
		if _, err := parsePool([]byte(bad.json)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("parsePool(%s) = %v, want %q", bad.json, err, bad.want)
		}
	}
}

// TestOffsetAddr: whereabouts counts offsets from the range's network address, IPv6 too.
func TestOffsetAddr(t *testing.T) {
	for _, c := range []struct{ prefix, key, want string }{
		{"10.0.0.0/24", "0", "10.0.0.0"},
		{"10.0.0.0/24", "255", "10.0.0.255"},
		{"10.0.0.0/24", "0001", "10.0.0.1"},
		{"fd00::/64", "18446744073709551615", "fd00::ffff:ffff:ffff:ffff"},
		{"fd00::/120", "16", "fd00::10"},
		{"::/0", "340282366920938463463374607431768211455", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
	} {
		a, err := offsetAddr(netip.MustParsePrefix(c.prefix), c.key)
		if err != nil || a.String() != c.want {
			t.Errorf("offsetAddr(%s, %s) = %v, %v; want %s", c.prefix, c.key, a, err, c.want)
		}
	}
	for _, c := range []struct{ prefix, key string }{
		{"10.0.0.0/24", "256"}, {"10.0.0.0/24", ""}, {"10.0.0.0/24", "+1"}, {"10.0.0.0/24", " 1"},
		{"fd00::/64", "18446744073709551616"}, {"::/0", "340282366920938463463374607431768211456"},
		{"10.0.0.0/8", strings.Repeat("9", 41)},
	} {
		if a, err := offsetAddr(netip.MustParsePrefix(c.prefix), c.key); err == nil {
			t.Errorf("offsetAddr(%s, %q) = %s, want an error", c.prefix, c.key, a)
		}
	}
}

// TestWhereaboutsNames: whereabouts' IPPoolName and NormalizeIP, as its pkg/storage/kubernetes
// writes them.
func TestWhereaboutsNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{wbPoolName("", netip.MustParsePrefix("10.0.0.0/24")), "10.0.0.0-24"},
		{wbPoolName("net1", netip.MustParsePrefix("10.0.0.0/24")), "net1-10.0.0.0-24"},
		{wbPoolName("", netip.MustParsePrefix("fd00::/64")), "fd00---64"},
		{wbReservationName("", netip.MustParseAddr("10.0.0.7")), "10.0.0.7"},
		{wbReservationName("net1", netip.MustParseAddr("fd00::7")), "net1-fd00--7"},
		{wbReservationName("", netip.MustParseAddr("fd00::")), "fd00--0"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestParseReservation(t *testing.T) {
	r, err := parseReservation([]byte(`{"metadata":{"namespace":"kube-system","name":"n-10.0.0.1"},"spec":{"podref":"ns/p","ifname":"net1"}}`))
	if err != nil || r != (wbReservation{Namespace: "kube-system", Name: "n-10.0.0.1", PodRef: "ns/p", IfName: "net1"}) {
		t.Fatalf("%+v, %v", r, err)
	}
	if _, err := parseReservation([]byte(`{"spec":[]}`)); err == nil {
		t.Fatal("a malformed reservation parsed")
	}
}

func TestSplitPodRef(t *testing.T) {
	if p, ok := splitPodRef("ns/name"); !ok || p.Namespace != "ns" || p.Name != "name" {
		t.Fatalf("%+v %t", p, ok)
	}
	for _, bad := range []string{"", "ns", "/name", "ns/", "a/b/c"} {
		if _, ok := splitPodRef(bad); ok {
			t.Errorf("splitPodRef(%q) accepted", bad)
		}
	}
}

// FuzzParsePool: any bytes give a pool, an error or problems; never a panic, and every address
// read lies in the pool's range.
func FuzzParsePool(f *testing.F) {
	f.Add([]byte(`{"metadata":{"name":"p"},"spec":{"range":"10.0.0.0/24","allocations":{"1":{"id":"c","podref":"a/b","ifname":"net1"}}}}`))
	f.Add([]byte(`{"spec":{"range":"fd00::/64","allocations":{"99999999999999999999":{"id":"c","podref":"a/b","ifname":"net1"}}}}`))
	f.Add([]byte(`{"spec":{"range":"::/0","allocations":{"x":{}}}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parsePool(data)
		if err != nil {
			return
		}
		for _, a := range p.Allocations {
			if !p.Range.Contains(a.Addr) || a.ContainerID == "" || a.IfName == "" || a.PodRef == "" {
				t.Fatalf("allocation %+v of range %s", a, p.Range)
			}
		}
	})
}
