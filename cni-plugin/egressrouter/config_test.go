package egressrouter

import (
	"errors"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/netpool/netpool/crds/network/v1/egressnad"
)

// contractExample is netpool's form of the config, as the reconciler writes it (docs/egress-router.md).
const contractExample = `{
  "cniVersion": "1.1.0", "name": "er", "type": "netpool-egress-router",
  "interface": {"type": "macvlan", "master": "", "mode": "bridge", "mtu": 0},
  "clusterInterface": "eth0",
  "addresses": [
    {"ip": "192.168.12.99/24", "gateway": "192.168.12.1"},
    {"ip": "fd00:12::99/64", "gateway": "fd00:12::1"}
  ],
  "redirect": {
    "rules": [
      {"destinationIP": "10.0.0.99", "port": 80, "protocol": "UDP", "targetPort": 80},
      {"destinationIP": "203.0.113.26", "port": 8080, "protocol": "TCP", "targetPort": 80}
    ],
    "fallbackIP": "203.0.113.30"
  },
  "macSeed": "ns/er"
}`

// openShiftExample is the NAD config OpenShift's operator writes for its documented example.
const openShiftExample = `{
  "cniVersion": "0.4.0", "name": "egress-router-cni-nad", "type": "egress-router",
  "interfaceType": "macvlan",
  "interfaceArgs": {"master": "ens4", "mode": "Bridge", "mtu": "1400"},
  "ip": {
    "addresses": ["192.168.12.99/24"],
    "gateway": "192.168.12.1",
    "destinations": ["80 UDP 10.0.0.99/32", "8080 TCP 203.0.113.26 80", "8443 tcp 203.0.113.27 443", "203.0.113.30"]
  }
}`

func TestParseContract(t *testing.T) {
	r, err := Parse([]byte(contractExample))
	if err != nil {
		t.Fatal(err)
	}
	want := &Router{
		CNIVersion: "1.1.0", Name: "er", MacvlanMode: "bridge", ClusterInterface: "eth0",
		Addresses: []Address{
			{netip.MustParsePrefix("192.168.12.99/24"), netip.MustParseAddr("192.168.12.1")},
			{netip.MustParsePrefix("fd00:12::99/64"), netip.MustParseAddr("fd00:12::1")},
		},
		Mode: &Redirect{
			Rules: []Rule{
				{netip.MustParseAddr("10.0.0.99"), 80, "UDP", 80},
				{netip.MustParseAddr("203.0.113.26"), 8080, "TCP", 80},
			},
			Fallback: netip.MustParseAddr("203.0.113.30"),
		},
		MAC: macFromSeed("ns/er"),
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("Parse = %+v\nwant    %+v", r, want)
	}
}

func TestParseContractDefaults(t *testing.T) {
	r, err := Parse([]byte(`{"cniVersion":"1.1.0","name":"er","type":"netpool-egress-router",
		"addresses":[{"ip":"192.0.2.5/24","gateway":"192.0.2.1"}],
		"redirect":{"rules":[{"destinationIP":"198.51.100.1","port":443,"protocol":"tcp"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.MacvlanMode != "bridge" || r.ClusterInterface != "eth0" || r.Master != "" || r.MTU != 0 || r.MAC != nil {
		t.Errorf("defaults: mode %q, clusterInterface %q, master %q, mtu %d, mac %v", r.MacvlanMode, r.ClusterInterface, r.Master, r.MTU, r.MAC)
	}
	rd, ok := r.Mode.(*Redirect)
	if !ok {
		t.Fatalf("mode %T, want the default Redirect", r.Mode)
	}
	if got := rd.Rules[0]; got.TargetPort != 443 || got.Protocol != "TCP" {
		t.Errorf("rule %+v: want targetPort defaulted to port and protocol upper-cased", got)
	}
}

// TestParseExplicitMode reads a config that names its mode: Redirect, the only one, as if absent.
func TestParseExplicitMode(t *testing.T) {
	r, err := Parse([]byte(strings.Replace(contractExample, `"type": "netpool-egress-router",`, `"type": "netpool-egress-router", "mode": "Redirect",`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if rd, ok := r.Mode.(*Redirect); !ok || len(rd.Rules) != 2 || r.Mode.Name() != egressnad.ModeRedirect {
		t.Errorf("mode %#v, want Redirect with the config's two rules", r.Mode)
	}
}

func TestParseOpenShift(t *testing.T) {
	r, err := Parse([]byte(openShiftExample))
	if err != nil {
		t.Fatal(err)
	}
	want := &Router{
		CNIVersion: "0.4.0", Name: "egress-router-cni-nad", Master: "ens4", MacvlanMode: "bridge", MTU: 1400,
		ClusterInterface: "eth0",
		Addresses:        []Address{{netip.MustParsePrefix("192.168.12.99/24"), netip.MustParseAddr("192.168.12.1")}},
		Mode: &Redirect{
			Rules: []Rule{
				{netip.MustParseAddr("10.0.0.99"), 80, "UDP", 80},
				{netip.MustParseAddr("203.0.113.26"), 8080, "TCP", 80},
				{netip.MustParseAddr("203.0.113.27"), 8443, "TCP", 443},
			},
			Fallback: netip.MustParseAddr("203.0.113.30"),
		},
		form: openShiftForm,
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("Parse = %+v\nwant    %+v", r, want)
	}
}

func TestParseOpenShiftFallbackField(t *testing.T) {
	_, err := Parse([]byte(`{"cniVersion":"0.4.0","name":"n","type":"egress-router",
		"ip":{"addresses":["192.0.2.5/24","fd00::5/64"],"gateway":"192.0.2.1","destinations":[],"fallbackIP":"192.0.2.77"}}`))
	if err == nil || !strings.Contains(err.Error(), "address fd00::5/64 has no gateway") {
		t.Fatalf("one gateway for two families: %v, want the IPv6 address reported without a gateway", err)
	}
	r, err := Parse([]byte(`{"cniVersion":"0.4.0","name":"n","type":"egress-router",
		"interfaceArgs":{"mtu":1500},
		"ip":{"addresses":["192.0.2.5/24"],"gateway":"192.0.2.1","fallbackIP":"192.0.2.77"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if fb := r.Mode.(*Redirect).Fallback; fb != netip.MustParseAddr("192.0.2.77") || r.MTU != 1500 {
		t.Errorf("fallback %v, mtu %d; want 192.0.2.77 and 1500", fb, r.MTU)
	}
}

const validRest = `"addresses":[{"ip":"192.0.2.5/24","gateway":"192.0.2.1"}]`

func TestParseErrors(t *testing.T) {
	head := `{"cniVersion":"1.1.0","name":"er","type":"netpool-egress-router",`
	osHead := `{"cniVersion":"0.4.0","name":"er","type":"egress-router",`
	for _, tc := range []struct{ name, conf, want string }{
		{"not JSON", `{`, "failed to parse network config"},
		{"no name", `{"cniVersion":"1.1.0",` + validRest + `}`, "name is required"},
		{"no address", head + `"addresses":[]}`, "at least one address is required"},
		{"bad CIDR", head + `"addresses":[{"ip":"192.0.2.5","gateway":"192.0.2.1"}]}`, `address "192.0.2.5" is not a CIDR`},
		{"host prefix", head + `"addresses":[{"ip":"192.0.2.5/32","gateway":"192.0.2.1"}]}`, "has a host prefix"},
		{"network address", head + `"addresses":[{"ip":"192.0.2.0/24","gateway":"192.0.2.1"}]}`, "is its subnet's network address"},
		{"two of a family", head + `"addresses":[{"ip":"192.0.2.5/24","gateway":"192.0.2.1"},{"ip":"198.51.100.5/24","gateway":"198.51.100.1"}]}`, "are of one IP family"},
		{"three addresses", head + `"addresses":[{"ip":"192.0.2.5/24","gateway":"192.0.2.1"},{"ip":"fd00::5/64","gateway":"fd00::1"},{"ip":"fd01::5/64","gateway":"fd01::1"}]}`, "3 addresses given"},
		{"no gateway", head + `"addresses":[{"ip":"192.0.2.5/24"}]}`, "address 192.0.2.5/24 has no gateway"},
		{"gateway outside", head + `"addresses":[{"ip":"192.0.2.5/24","gateway":"198.51.100.1"}]}`, "gateway 198.51.100.1 of address 192.0.2.5/24 is not inside its subnet 192.0.2.0/24"},
		{"gateway other family", head + `"addresses":[{"ip":"192.0.2.5/24","gateway":"fd00::1"}]}`, "is not inside its subnet"},
		{"gateway is address", head + `"addresses":[{"ip":"192.0.2.5/24","gateway":"192.0.2.5"}]}`, "is the address itself"},
		{"bad gateway", head + `"addresses":[{"ip":"192.0.2.5/24","gateway":"gw"}]}`, `gateway "gw" of address 192.0.2.5/24 is not an IP address`},
		{"mapped address", head + `"addresses":[{"ip":"::ffff:192.0.2.5/120","gateway":"192.0.2.1"}]}`, "IPv4-mapped"},
		{"unknown interface field", head + validRest + `,"interface":{"typ":"macvlan"}}`, `interface: json: unknown field "typ"`},
		{"ipvlan", head + validRest + `,"interface":{"type":"ipvlan"}}`, `interface.type "ipvlan" is not supported`},
		{"bad mode", head + validRest + `,"interface":{"mode":"Bridge"}}`, `macvlan mode "Bridge" is not one of`},
		{"bad master", head + validRest + `,"interface":{"master":"eth0/../x"}}`, `master "eth0/../x": contains`},
		{"long master", head + validRest + `,"interface":{"master":"abcdefghijklmnop"}}`, "longer than 15 bytes"},
		{"bad mtu", head + validRest + `,"interface":{"mtu":-1}}`, "mtu -1 is not between 0 and 65535"},
		{"bad cluster interface", head + validRest + `,"clusterInterface":"a b"}`, `clusterInterface "a b"`},
		{"unknown rule field", head + validRest + `,"redirect":{"rules":[{"destinationIP":"192.0.2.9","port":80,"protocol":"TCP","target":81}]}}`, `unknown field "target"`},
		{"bad destination", head + validRest + `,"redirect":{"rules":[{"destinationIP":"x","port":80,"protocol":"TCP"}]}}`, `redirect.rules[0]: destinationIP "x" is not an IP address`},
		{"port 0", head + validRest + `,"redirect":{"rules":[{"destinationIP":"192.0.2.9","port":0,"protocol":"TCP"}]}}`, "port 0 is not between 1 and 65535"},
		{"port too big", head + validRest + `,"redirect":{"rules":[{"destinationIP":"192.0.2.9","port":65536,"protocol":"TCP"}]}}`, "port 65536 is not between 1 and 65535"},
		{"targetPort 0", head + validRest + `,"redirect":{"rules":[{"destinationIP":"192.0.2.9","port":80,"protocol":"TCP","targetPort":0}]}}`, "targetPort 0 is not between"},
		{"bad protocol", head + validRest + `,"redirect":{"rules":[{"destinationIP":"192.0.2.9","port":80,"protocol":"ICMP"}]}}`, `protocol "ICMP" is not one of TCP, UDP, SCTP`},
		{"repeated rule", head + validRest + `,"redirect":{"rules":[{"destinationIP":"192.0.2.9","port":80,"protocol":"TCP"},{"destinationIP":"192.0.2.8","port":80,"protocol":"tcp"}]}}`, "repeat port 80 protocol TCP for IPv4"},
		{"destination of no family", head + validRest + `,"redirect":{"rules":[{"destinationIP":"fd00::9","port":80,"protocol":"TCP"}]}}`, "destinationIP fd00::9 has no router address of its IP family"},
		{"multicast destination", head + validRest + `,"redirect":{"rules":[{"destinationIP":"224.0.0.1","port":80,"protocol":"TCP"}]}}`, "is not a routable unicast address"},
		{"bad fallback", head + validRest + `,"redirect":{"fallbackIP":"nope"}}`, `redirect.fallbackIP "nope" is not an IP address`},
		{"fallback of no family", head + validRest + `,"redirect":{"fallbackIP":"fd00::30"}}`, "fallbackIP fd00::30 has no router address of its IP family"},
		{"long seed", head + validRest + `,"macSeed":"` + strings.Repeat("x", maxSeed+1) + `"}`, "macSeed is 1025 bytes long"},
		{"unsupported mode", head + validRest + `,"mode":"HTTPProxy"}`, `mode "HTTPProxy" is not supported; the only mode is Redirect`},
		{"passthru without master", head + validRest + `,"interface":{"mode":"passthru"}}`, "interface.mode passthru needs interface.master"},
		{"OpenShift passthru without master", osHead + `"interfaceArgs":{"mode":"Passthru"},"ip":{"addresses":["192.0.2.5/24"],"gateway":"192.0.2.1"}}`,
			"interfaceArgs.mode passthru needs interfaceArgs.master"},
		{"mixed forms", head + validRest + `,"ip":{"addresses":["192.0.2.5/24"]}}`, `mixes OpenShift's fields`},
		{"OpenShift without ip", osHead + `"interfaceType":"macvlan"}`, "ip is required"},
		{"OpenShift ipvlan", osHead + `"interfaceType":"ipvlan","ip":{"addresses":["192.0.2.5/24"],"gateway":"192.0.2.1"}}`, `interfaceType "ipvlan" is not supported`},
		{"OpenShift podIP", osHead + `"podIP":{"a":{}},"ip":{"addresses":["192.0.2.5/24"],"gateway":"192.0.2.1"}}`, "podIP and ipConfig are not supported"},
		{"OpenShift unknown arg", osHead + `"interfaceArgs":{"parent":"eth1"},"ip":{"addresses":["192.0.2.5/24"],"gateway":"192.0.2.1"}}`, "interfaceArgs.parent is not supported"},
		{"OpenShift bad mtu", osHead + `"interfaceArgs":{"mtu":"big"},"ip":{"addresses":["192.0.2.5/24"],"gateway":"192.0.2.1"}}`, `interfaceArgs.mtu: "big" is not a number`},
		{"OpenShift master not string", osHead + `"interfaceArgs":{"master":1},"ip":{"addresses":["192.0.2.5/24"],"gateway":"192.0.2.1"}}`, "interfaceArgs.master: want a string"},
		{"OpenShift gateway outside", osHead + `"ip":{"addresses":["192.0.2.5/24"],"gateway":"198.51.100.1"}}`, "ip.gateway 198.51.100.1 is not inside the subnet of any of ip.addresses 192.0.2.5/24"},
		{"OpenShift bad destination", osHead + `"ip":{"addresses":["192.0.2.5/24"],"gateway":"192.0.2.1","destinations":["80 TCP"]}}`, `ip.destinations[0]: "80 TCP" is neither`},
		{"OpenShift two fallbacks", osHead + `"ip":{"addresses":["192.0.2.5/24"],"gateway":"192.0.2.1","destinations":["192.0.2.8","192.0.2.9"]}}`, "is a second fallback"},
		{"OpenShift fallbacks disagree", osHead + `"ip":{"addresses":["192.0.2.5/24"],"gateway":"192.0.2.1","destinations":["192.0.2.8"],"fallbackIP":"192.0.2.9"}}`, "disagree"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.conf))
			if err == nil {
				t.Fatalf("Parse succeeded with %+v; want an error containing %q", r, tc.want)
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse error %q; want ErrInvalidConfig containing %q", err, tc.want)
			}
		})
	}
}

func TestParseBoundsRules(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"cniVersion":"1.1.0","name":"er",` + validRest + `,"redirect":{"rules":[`)
	for i := 0; i <= MaxRules; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"destinationIP":"192.0.2.9","protocol":"TCP","port":` + strconv.Itoa(i+1) + `}`)
	}
	b.WriteString(`]}}`)
	if _, err := Parse([]byte(b.String())); err == nil || !strings.Contains(err.Error(), "257 redirect rules given; at most 256") {
		t.Errorf("Parse of %d rules: %v; want the bound reported", MaxRules+1, err)
	}
}

func TestParseDestination(t *testing.T) {
	for _, tc := range []struct {
		in       string
		rule     Rule
		fallback string
		err      string
	}{
		{in: "80 UDP 10.0.0.99", rule: Rule{netip.MustParseAddr("10.0.0.99"), 80, "UDP", 80}},
		{in: "8080 tcp 203.0.113.26 80", rule: Rule{netip.MustParseAddr("203.0.113.26"), 8080, "TCP", 80}},
		{in: " 9000  SCTP  fd00::9/128 ", rule: Rule{netip.MustParseAddr("fd00::9"), 9000, "SCTP", 9000}},
		{in: "203.0.113.30", fallback: "203.0.113.30"},
		{in: "fd00::30/128", fallback: "fd00::30"},
		{in: "", err: "is neither"},
		{in: "80 TCP 1.2.3.4 81 82", err: "is neither"},
		{in: "0 TCP 1.2.3.4", err: `port "0" is not between 1 and 65535`},
		{in: "x TCP 1.2.3.4", err: `port "x" is not between`},
		{in: "80 GRE 1.2.3.4", err: `protocol "GRE" is not one of`},
		{in: "80 TCP 1.2.3.0/24", err: "is not an IP address or a host prefix"},
		{in: "80 TCP fe80::1%eth0", err: "is not an IP address"},
		{in: "80 TCP 1.2.3.4 65536", err: `targetPort "65536" is not between`},
		{in: "10.0.0.0/8", err: "host prefix"},
	} {
		rule, fb, err := ParseDestination(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseDestination(%q) error %v; want %q", tc.in, err, tc.err)
			}
		case err != nil:
			t.Errorf("ParseDestination(%q): %v", tc.in, err)
		case tc.fallback != "":
			if fb != netip.MustParseAddr(tc.fallback) || rule != (Rule{}) {
				t.Errorf("ParseDestination(%q) = %+v, %v; want fallback %s", tc.in, rule, fb, tc.fallback)
			}
		case rule != tc.rule || fb.IsValid():
			t.Errorf("ParseDestination(%q) = %+v, %v; want %+v", tc.in, rule, fb, tc.rule)
		}
	}
}
