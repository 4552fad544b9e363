package e2e

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/netpool/netpool/cni-plugin/egressrouter"
	"github.com/netpool/netpool/test/harness"
)

// TestEgressRouterOnePerPod attaches a second egress router to a pod that has one (another NAD,
// another interface name, another address): ADD refuses it with code 114 before it changes
// anything, and neither that ADD nor the DEL a runtime runs after it touches the first router,
// which keeps redirecting and passes CHECK. When the first router's interface is gone but its
// routing and table are left, ADD refuses again, naming the leftovers, and a DEL clears them.
func TestEgressRouterOnePerPod(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ctx := testContext(t)
	topo := newEgressTopology(t)
	a := egressV4
	serveTCP(t, topo.dest, netip.AddrPortFrom(a.dest, 80), "dest")
	client := netip.AddrPortFrom(a.routerCluster, 8080)

	first := mustNetwork(t, topo.node, egressConflist(t, egressConf{addrs: []egressAddrs{a}}.json(t)), nil)
	rt1 := harness.Attachment("egress-one-per-pod", topo.router, "net1")
	mustAdd(ctx, t, first, rt1)
	assertReaches(ctx, t, topo.client, "tcp", client, "dest", netip.AddrPortFrom(a.dest, 80), a.router.Addr())
	installed := readEgressState(t, topo.router)

	conf := egressConf{addrs: []egressAddrs{a}}.json(t)
	conf["addresses"] = []any{map[string]any{"ip": "192.0.2.98/24", "gateway": a.gateway.String()}}
	conf["macSeed"] = "e2e/second-attachment"
	second := mustNetwork(t, topo.node, egressConflist(t, conf), nil)
	rt2 := harness.Attachment("egress-one-per-pod", topo.router, "net2")
	res, err := second.Add(ctx, rt2)
	if err == nil {
		t.Fatalf("second egress ADD succeeded with %v; want it refused", res.IPs)
	}
	if code := harness.CNIErrorCode(err); code != egressrouter.CodeRouterExists || !strings.Contains(err.Error(), "holds the egress router of net1") {
		t.Errorf("second egress ADD: %v (code %d); want code %d naming the router of net1", err, code, egressrouter.CodeRouterExists)
	} else {
		t.Logf("second egress ADD refused as expected: %v", err)
	}
	assertUnchanged := func(when string) {
		t.Helper()
		if st := readEgressState(t, topo.router); !slices.Equal(st.links, installed.links) || st.rules != installed.rules ||
			st.routes != installed.routes || len(st.chains) != len(installed.chains) {
			t.Errorf("%s, the pod's namespace holds %+v; want the first router's %+v", when, st, installed)
		}
		mustCheck(ctx, t, first, rt1)
		assertReaches(ctx, t, topo.client, "tcp", client, "dest", netip.AddrPortFrom(a.dest, 80), a.router.Addr())
	}
	assertUnchanged("after the refused ADD")
	mustDel(ctx, t, second, rt2) // as the runtime does after a failed ADD
	mustDel(ctx, t, second, rt2) // and again: DEL is idempotent
	assertUnchanged("after the second attachment's DEL")

	// The first router's interface goes (deleted by hand): its routing and table are left, owned
	// by no interface. ADD names them; the DEL that follows removes them; then ADD works.
	must(t, topo.router.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName("net1")
		if err != nil {
			return err
		}
		return netlink.LinkDel(link)
	}))
	if _, err := first.Add(ctx, rt1); harness.CNIErrorCode(err) != egressrouter.CodeRouterExists || !strings.Contains(errString(err), "whose interface is gone") {
		t.Errorf("ADD over a router's leftovers: %v; want code %d naming them", err, egressrouter.CodeRouterExists)
	}
	mustDel(ctx, t, first, rt1)
	assertEgressClean(t, topo.router, "net1")
	mustAdd(ctx, t, first, rt1)
	assertReaches(ctx, t, topo.client, "tcp", client, "dest", netip.AddrPortFrom(a.dest, 80), a.router.Addr())
	mustDel(ctx, t, first, rt1)
	assertEgressClean(t, topo.router, "net1")
}
