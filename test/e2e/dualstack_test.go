package e2e

import (
	"net/netip"
	"testing"

	"github.com/netpool/netpool/test/harness"
)

// TestDualStack gives netpool an IPv4 and an IPv6 range through ipRanges and checks that each of
// two bridged namespaces gets exactly one address of each family, inside its range at its prefix
// length, distinct from the other's, and that they reach each other over TCP on both families.
func TestDualStack(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ctx := testContext(t)

	var (
		first4 = netip.MustParseAddr("10.77.4.10")
		last4  = netip.MustParseAddr("10.77.4.254")
		first6 = netip.MustParseAddr("fd00:77:4::10")
		last6  = netip.MustParseAddr("fd00:77:4::ffff:ffff:ffff:fffe")
	)
	host := mustNetNS(t)
	// The ranges start above ::1 and .1, which bridge (isGateway) puts on itself as gateways.
	conf, err := harness.BridgeConflist("e2e-dualstack", "np-br4", netpoolIPAM(t, map[string]any{
		"ipRanges": []any{
			map[string]any{"range": "10.77.4.0/24", "range_start": first4.String()},
			map[string]any{"range": "fd00:77:4::/64", "range_start": first6.String()},
		},
	}))
	network := mustNetwork(t, host, conf, err)

	nsA, nsB := mustNetNS(t), mustNetNS(t)
	a := harness.Attachment("e2e-dualstack-a", nsA, "eth0")
	b := harness.Attachment("e2e-dualstack-b", nsB, "eth0")

	type pair struct{ v4, v6 netip.Prefix }
	split := func(ips []netip.Prefix) pair {
		t.Helper()
		var p pair
		for _, ip := range ips {
			switch {
			case ip.Addr().Is4() && !p.v4.IsValid():
				p.v4 = ip
			case ip.Addr().Is6() && !p.v6.IsValid():
				p.v6 = ip
			default:
				t.Fatalf("ADD result %v: want exactly one IPv4 and one IPv6 address", ips)
			}
		}
		if !p.v4.IsValid() || !p.v6.IsValid() {
			t.Fatalf("ADD result %v: want exactly one IPv4 and one IPv6 address", ips)
		}
		assertAddr(t, p.v4, first4, last4, 24)
		assertAddr(t, p.v6, first6, last6, 64)
		return p
	}
	ipsA, ipsB := resultIPs(t, mustAdd(ctx, t, network, a)), resultIPs(t, mustAdd(ctx, t, network, b))
	pa, pb := split(ipsA), split(ipsB)
	if pa.v4.Addr() == pb.v4.Addr() || pa.v6.Addr() == pb.v6.Addr() {
		t.Fatalf("namespaces share an address: %v and %v", ipsA, ipsB)
	}
	// WaitAddrs inside also waits for IPv6 duplicate address detection to finish.
	assertKernelAddrs(t, nsA, "eth0", ipsA)
	assertKernelAddrs(t, nsB, "eth0", ipsB)

	assertTCP(ctx, t, nsB, pb.v4.Addr(), nsA, pa.v4.Addr())
	assertTCP(ctx, t, nsB, pb.v6.Addr(), nsA, pa.v6.Addr())
	assertTCP(ctx, t, nsA, pa.v6.Addr(), nsB, pb.v6.Addr())

	mustCheck(ctx, t, network, a)
	mustCheck(ctx, t, network, b)
	mustDel(ctx, t, network, a)
	mustDel(ctx, t, network, b)
}
