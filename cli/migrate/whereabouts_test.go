package migrate

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/netpool/netpool/ipam"
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

// TestLockedPool: a pool netpoolctl locked is read with its range (and marked), so the import
// after the lock finds its allocations; whereabouts itself cannot parse the locked range.
func TestLockedPool(t *testing.T) {
	p, err := parsePool([]byte(`{"metadata":{"namespace":"kube-system","name":"n-10.0.0.0-24"},"spec":{"range":"` + lockedRangePrefix + `10.0.0.0/24","allocations":{
		"5":{"id":"c5","podref":"ns/p5","ifname":"net1"}}}}`))
	if err != nil || !p.Locked || p.Range.String() != "10.0.0.0/24" || len(p.Allocations) != 1 || p.Allocations[0].Addr.String() != "10.0.0.5" {
		t.Fatalf("locked pool %+v, %v", p, err)
	}
	if _, _, err := net.ParseCIDR(lockedRangePrefix + "10.0.0.0/24"); err == nil {
		t.Fatal("a locked range parses as a CIDR: whereabouts would keep allocating")
	}
}

func TestWhereaboutsNetworkAndReservationNames(t *testing.T) {
	for _, c := range []struct {
		name, subnet, network string
		ok                    bool
	}{
		{"blue-10.0.0.0-24", "10.0.0.0/24", "blue", true},
		{"a-b-c-10.0.0.0-24", "10.0.0.0/24", "a-b-c", true},
		{"10.0.0.0-24", "10.0.0.0/24", "", true},
		{"fd00---120", "fd00::/120", "", true},
		{"v6-fd00---120", "fd00::/120", "v6", true},
		{"blue-node1-10.0.0.0-24", "10.0.0.0/24", "blue-node1", true},
		{"other", "10.0.0.0/24", "", false},
		{"-10.0.0.0-24", "10.0.0.0/24", "", false},
	} {
		n, ok := wbNetworkOf(c.name, netip.MustParsePrefix(c.subnet))
		if n != c.network || ok != c.ok {
			t.Errorf("wbNetworkOf(%q) = %q %t, want %q %t", c.name, n, ok, c.network, c.ok)
		}
	}
	networks := map[string]bool{"": true, "blue": true, "blue-x": true, "v6": true}
	for _, c := range []struct{ name, network, addr string }{
		{"blue-10.0.0.5", "blue", "10.0.0.5"},
		{"blue-x-10.0.0.5", "blue-x", "10.0.0.5"},
		{"10.0.0.5", "", "10.0.0.5"},
		{"v6-fd00--5", "v6", "fd00::5"},
		{"v6-fd00--0", "v6", "fd00::"},
		{"red-10.0.0.5", "", ""},
		{"blue-notanip", "", ""},
	} {
		n, a, ok := wbReservationAddr(c.name, networks)
		if c.addr == "" {
			if ok {
				t.Errorf("wbReservationAddr(%q) = %q %s, want none", c.name, n, a)
			}
			continue
		}
		if !ok || n != c.network || a.String() != c.addr {
			t.Errorf("wbReservationAddr(%q) = %q %s %t, want %q %s", c.name, n, a, ok, c.network, c.addr)
		}
	}
}

// TestAgentDirNotes: configuration_path and log_file outside the agents' directories are flagged,
// with the flag that serves them; inside, or with the flag given, they are not.
func TestAgentDirNotes(t *testing.T) {
	k3s := "/var/lib/rancher/k3s/agent/etc/cni/net.d/whereabouts.d/whereabouts.conf"
	s := section{Path: "ipam", ConfigurationPath: k3s, Config: &ipam.Config{LogFile: "/var/log/whereabouts.log"}}
	notes := DefaultAgentDirs().notes(s)
	if len(notes) != 2 || !strings.Contains(notes[0], "--extra-config-dir=/var/lib/rancher/k3s/agent/etc/cni/net.d ") ||
		!strings.Contains(notes[0], "every ADD fails with code 7") || !strings.Contains(notes[1], "--extra-log-dir=/var/log ") {
		t.Fatalf("notes %q", notes)
	}
	served := DefaultAgentDirs()
	served.Config = append(served.Config, "/var/lib/rancher/k3s/agent/etc/cni/net.d")
	served.Log = append(served.Log, "/var/log")
	if notes := served.notes(s); len(notes) != 0 {
		t.Errorf("with the directories served: %q", notes)
	}
	inside := section{Path: "ipam", ConfigurationPath: "/etc/cni/net.d/whereabouts.d/whereabouts.conf", Config: &ipam.Config{LogFile: "/var/log/netpool/x.log"}}
	if notes := DefaultAgentDirs().notes(inside); len(notes) != 0 {
		t.Errorf("default directories: %q", notes)
	}
}
