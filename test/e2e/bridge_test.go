package e2e

import (
	"net/netip"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netpool/netpool/test/harness"
)

// TestBridge attaches two namespaces to a bridge with netpool on bbolt over a range of exactly two
// addresses, and follows an attachment's life: distinct addresses at the range's prefix length with
// the configured gateway, TCP both ways, CHECK, a third ADD refused while the range is full, DEL
// (twice) giving the address back, and the third namespace then getting it. STATUS is ready while
// the range has a free address and says "not available" (code 50) while it is full, as the spec
// asks of a plugin whose resources are exhausted.
func TestBridge(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ctx := testContext(t)

	var (
		first   = netip.MustParseAddr("10.77.1.10")
		last    = netip.MustParseAddr("10.77.1.11")
		gateway = netip.MustParseAddr("10.77.1.1")
	)
	host := mustNetNS(t)
	conf, err := harness.BridgeConflist("e2e-bridge", "np-br1", netpoolIPAM(t, map[string]any{
		"range":       "10.77.1.0/24",
		"range_start": first.String(),
		"range_end":   last.String(),
		"gateway":     gateway.String(),
		"routes":      []any{map[string]any{"dst": "0.0.0.0/0"}},
	}))
	network := mustNetwork(t, host, conf, err)

	nsA, nsB, nsC := mustNetNS(t), mustNetNS(t), mustNetNS(t)
	a := harness.Attachment("e2e-bridge-a", nsA, "eth0")
	b := harness.Attachment("e2e-bridge-b", nsB, "eth0")
	c := harness.Attachment("e2e-bridge-c", nsC, "eth0")

	assertStatus(ctx, t, network, 0)
	resA, resB := mustAdd(ctx, t, network, a), mustAdd(ctx, t, network, b)
	ipsA, ipsB := resultIPs(t, resA), resultIPs(t, resB)
	if len(ipsA) != 1 || len(ipsB) != 1 {
		t.Fatalf("ADD results hold %v and %v, want one address each", ipsA, ipsB)
	}
	addrA, addrB := ipsA[0], ipsB[0]
	assertAddr(t, addrA, first, last, 24)
	assertAddr(t, addrB, first, last, 24)
	if addrA.Addr() == addrB.Addr() {
		t.Fatalf("both namespaces got %s", addrA)
	}
	assertGateway(t, resA, gateway)
	assertGateway(t, resB, gateway)
	if len(resA.Routes) != 1 || resA.Routes[0].Dst.String() != "0.0.0.0/0" {
		t.Errorf("ADD result routes = %v, want the configured 0.0.0.0/0", resA.Routes)
	}
	assertKernelAddrs(t, nsA, "eth0", ipsA)
	assertKernelAddrs(t, nsB, "eth0", ipsB)

	assertTCP(ctx, t, nsB, addrB.Addr(), nsA, addrA.Addr())
	assertTCP(ctx, t, nsA, addrA.Addr(), nsB, addrB.Addr())

	mustCheck(ctx, t, network, a)
	mustCheck(ctx, t, network, b)
	assertStatus(ctx, t, network, types.ErrPluginNotAvailable)

	// Both addresses are taken: a third attachment must be refused, not given a duplicate.
	mustAddFail(ctx, t, network, c)

	mustDel(ctx, t, network, a)
	mustDel(ctx, t, network, a) // DEL is idempotent
	assertStatus(ctx, t, network, 0)

	resC := mustAdd(ctx, t, network, c)
	ipsC := resultIPs(t, resC)
	if len(ipsC) != 1 || ipsC[0] != addrA {
		t.Fatalf("ADD after DEL got %v, want %s, the address DEL released", ipsC, addrA)
	}
	assertKernelAddrs(t, nsC, "eth0", ipsC)
	assertTCP(ctx, t, nsB, addrB.Addr(), nsC, addrA.Addr())
	mustCheck(ctx, t, network, c)

	mustDel(ctx, t, network, b)
	mustDel(ctx, t, network, c)
}
