package e2e

import (
	"net/netip"
	"testing"

	"github.com/netpool/netpool/test/harness"
)

// TestMacvlan attaches two namespaces with macvlan in bridge mode on one end of a veth pair (the
// kernel here has no dummy links) with netpool as IPAM, and checks that they get distinct addresses
// of the range at its prefix length and reach each other over TCP.
func TestMacvlan(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ctx := testContext(t)

	var (
		first = netip.MustParseAddr("10.77.3.10")
		last  = netip.MustParseAddr("10.77.3.254")
	)
	host := mustNetNS(t)
	if err := harness.AddVethPair(host, "np-mv0", "np-mv1"); err != nil {
		t.Fatal(err)
	}
	conf, err := harness.MacvlanConflist("e2e-macvlan", "np-mv0", netpoolIPAM(t, map[string]any{
		"range":       "10.77.3.0/24",
		"range_start": first.String(),
		"gateway":     "10.77.3.1",
	}))
	network := mustNetwork(t, host, conf, err)

	nsA, nsB := mustNetNS(t), mustNetNS(t)
	a := harness.Attachment("e2e-macvlan-a", nsA, "net1")
	b := harness.Attachment("e2e-macvlan-b", nsB, "net1")

	ipsA, ipsB := resultIPs(t, mustAdd(ctx, t, network, a)), resultIPs(t, mustAdd(ctx, t, network, b))
	if len(ipsA) != 1 || len(ipsB) != 1 {
		t.Fatalf("ADD results hold %v and %v, want one address each", ipsA, ipsB)
	}
	assertAddr(t, ipsA[0], first, last, 24)
	assertAddr(t, ipsB[0], first, last, 24)
	if ipsA[0].Addr() == ipsB[0].Addr() {
		t.Fatalf("both namespaces got %s", ipsA[0])
	}
	assertKernelAddrs(t, nsA, "net1", ipsA)
	assertKernelAddrs(t, nsB, "net1", ipsB)

	assertTCP(ctx, t, nsB, ipsB[0].Addr(), nsA, ipsA[0].Addr())
	assertTCP(ctx, t, nsA, ipsA[0].Addr(), nsB, ipsB[0].Addr())

	mustCheck(ctx, t, network, a)
	mustCheck(ctx, t, network, b)
	mustDel(ctx, t, network, a)
	mustDel(ctx, t, network, b)
}
