package egressrouter

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

func TestMACFromSeed(t *testing.T) {
	a, b := macFromSeed("ns/router"), macFromSeed("ns/router")
	if a.String() != b.String() {
		t.Errorf("the same seed gave %s and %s", a, b)
	}
	if c := macFromSeed("ns/other"); c.String() == a.String() {
		t.Errorf("two seeds gave one MAC %s", a)
	}
	for _, seed := range []string{"", "a", "ns/router", strings.Repeat("z", 1000)} {
		m := macFromSeed(seed)
		if len(m) != 6 || m[0]&0x02 == 0 || m[0]&0x01 != 0 {
			t.Errorf("MAC %s from %q is not a locally administered unicast address", m, seed)
		}
	}
}

func TestConflictingSender(t *testing.T) {
	us := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	them := net.HardwareAddr{2, 0, 0, 0, 0, 2}
	ip := netip.MustParseAddr("192.0.2.99")
	other := netip.MustParseAddr("192.0.2.7")
	zero := netip.IPv4Unspecified()
	for _, tc := range []struct {
		name string
		pkt  []byte
		want net.HardwareAddr
	}{
		{"reply from the holder", arpPacket(2, them, ip, other), them},
		{"request from the holder", arpPacket(1, them, ip, other), them},
		{"another host probing for it", arpPacket(1, them, zero, ip), them},
		{"our own probe", arpPacket(1, us, zero, ip), nil},
		{"unrelated traffic", arpPacket(2, them, other, other), nil},
		{"a reply about another address", arpPacket(2, them, zero, ip), nil},
		{"short packet", arpPacket(1, them, ip, ip)[:20], nil},
	} {
		if got := conflictingSender(tc.pkt, us, ip); got.String() != tc.want.String() {
			t.Errorf("%s: conflictingSender = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestChains pins the table's layout: rules in config order, the fallback last, SNAT per address,
// and reject rules only for a family without a fallback.
func TestChains(t *testing.T) {
	r, err := Parse([]byte(contractExample))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, c := range chains(r, "net1") {
		got[c.name] = []string{fmt.Sprintf("policy %d", c.policy)}
		for _, rule := range c.rules {
			got[c.name] = append(got[c.name], rule.desc)
		}
	}
	want := map[string][]string{
		"prerouting":  {"policy 1", "dnat UDP 80 -> 10.0.0.99:80", "dnat TCP 8080 -> 203.0.113.26:80", "dnat fallback -> 203.0.113.30"},
		"postrouting": {"policy 1", "snat net1 -> 192.168.12.99", "snat net1 -> fd00:12::99"},
		"forward":     {"policy 0", "accept replies", "accept redirected eth0 -> net1"},
		"input":       {"policy 1", "reject unmatched ipv6 tcp", "reject unmatched ipv6 udp", "reject unmatched ipv6 sctp"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("chains = %v\nwant     %v", got, want)
	}
}

func TestToCNIError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code uint
	}{
		{invalid("x"), types.ErrInvalidNetworkConfig},
		{fmt.Errorf("%w: y", ErrAddressInUse), CodeAddressInUse},
		{fmt.Errorf("%w: y", ErrCheckFailed), CodeCheckFailed},
		{fmt.Errorf("%w: y", ErrMasterNotFound), CodeMasterNotFound},
		{fmt.Errorf("%w: y", ErrClusterInterfaceNotFound), CodeClusterInterfaceNotFound},
		{fmt.Errorf("%w: y", ErrRouterExists), CodeRouterExists},
		{errors.New("netlink said no"), types.ErrInternal},
		{types.NewError(55, "kept", ""), 55},
	} {
		var cniErr *types.Error
		if err := toCNIError(tc.err); !errors.As(err, &cniErr) || cniErr.Code != tc.code || cniErr.Msg != tc.err.Error() && tc.code != 55 {
			t.Errorf("toCNIError(%v) = %v, want code %d with the whole message", tc.err, err, tc.code)
		}
	}
	if toCNIError(nil) != nil {
		t.Error("toCNIError(nil) is not nil")
	}
	if err := statusError(errors.New("no nftables")); harnessCode(err) != types.ErrPluginNotAvailable {
		t.Errorf("statusError = %v, want code 50", err)
	}
	if err := statusError(invalid("bad")); harnessCode(err) != types.ErrInvalidNetworkConfig {
		t.Errorf("statusError of a bad config = %v, want code 7", err)
	}
}

func harnessCode(err error) uint {
	var cniErr *types.Error
	if errors.As(err, &cniErr) {
		return cniErr.Code
	}
	return 0
}
