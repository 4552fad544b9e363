package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netpool/netpool/test/harness"
)

// TestEgressRouterKeepsTheNodeOnItsNetwork gives the node's namespace an uplink as a node has one:
// m0 holds the namespace's addresses and its default routes, and lo one more address. A NAD (which
// any namespace admin may write) that asks for passthru on that uplink, by name or by leaving the
// master out, for passthru on an interface another default route leaves by, or for a router
// address the node holds anywhere, is refused by ADD and by STATUS with code 7 naming the field;
// neither the node's namespace nor the pod's changes, and the DEL a runtime runs next succeeds.
// Passthru on an interface that carries nothing of the node still works.
func TestEgressRouterKeepsTheNodeOnItsNetwork(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ctx := testContext(t)
	topo := newEgressTopology(t)
	a := egressV4
	serveTCP(t, topo.dest, netip.AddrPortFrom(a.dest, 80), "dest")
	nodeV4, nodeV6 := netip.MustParsePrefix("192.0.2.200/24"), netip.MustParsePrefix("fd00:251::200/64")
	nodeLo := netip.MustParsePrefix("192.0.2.201/32")
	mustAddr(t, topo.node, "m0", nodeV4)
	mustAddr(t, topo.node, "m0", nodeV6)
	mustDefaultRoute(t, topo.node, "m0", egressV4.gateway)
	mustDefaultRoute(t, topo.node, "m0", egressV6.gateway)
	mustAddr(t, topo.node, "lo", nodeLo)
	// m1 reaches the same external L2 and carries nothing of the node: passthru's proper master.
	mustVeth(t, topo.node, "m1", topo.ext, "m1p")
	mustEnslave(t, topo.ext, "m1p")
	// m2 carries no address, but a default route of another table leaves by it.
	must(t, harness.AddVethPair(topo.node, "m2", "m2p"))
	must(t, topo.node.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName("m2")
		if err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Table: 100, Scope: netlink.SCOPE_LINK,
			Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}})
	}))

	netpool := func(iface map[string]any, addresses ...netip.Prefix) map[string]any {
		c := egressConf{addrs: []egressAddrs{a}}.json(t)
		if iface != nil {
			c["interface"] = iface
		}
		if len(addresses) > 0 {
			var list []any
			for _, p := range addresses {
				gw := egressV4.gateway
				if p.Addr().Is6() {
					gw = egressV6.gateway
				}
				list = append(list, map[string]any{"ip": p.String(), "gateway": gw.String()})
			}
			c["addresses"] = list
		}
		return c
	}
	openShift := func(args map[string]any, address netip.Prefix) map[string]any {
		return map[string]any{
			"type": "netpool-egress-router", "interfaceType": "macvlan", "interfaceArgs": args,
			"ip": map[string]any{"addresses": []string{address.String()}, "gateway": a.gateway.String(),
				"destinations": []string{"8080 TCP " + a.dest.String() + " 80"}},
		}
	}
	nodeBefore := readNodeUplink(t, topo.node)
	for i, tc := range []struct {
		name string
		conf map[string]any
		want string
	}{
		{"passthru on the uplink", netpool(map[string]any{"master": "m0", "mode": "passthru"}),
			"interface.mode passthru on interface.master m0: m0 holds the node's address"},
		{"passthru with the master left out", netpool(map[string]any{"mode": "passthru"}),
			"interface.mode passthru needs interface.master"},
		{"passthru on the uplink, OpenShift's form", openShift(map[string]any{"master": "m0", "mode": "Passthru"}, a.router),
			"interfaceArgs.mode passthru on interfaceArgs.master m0"},
		{"passthru on an interface a default route leaves by", netpool(map[string]any{"master": "m2", "mode": "passthru"}),
			"the node's default route (table 100) leaves by m2"},
		{"the node's uplink address", netpool(nil, nodeV4),
			"addresses[0].ip 192.0.2.200 is an address of the node itself (on m0)"},
		{"an address the node holds on lo", netpool(nil, netip.MustParsePrefix("192.0.2.201/24")),
			"addresses[0].ip 192.0.2.201 is an address of the node itself (on lo)"},
		{"the node's IPv6 address", netpool(nil, a.router, nodeV6),
			"addresses[1].ip fd00:251::200 is an address of the node itself (on m0)"},
		{"the node's address, OpenShift's form", openShift(map[string]any{"master": "m0"}, nodeV4),
			"ip.addresses[0] 192.0.2.200 is an address of the node itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			network := mustNetwork(t, topo.node, egressConflist(t, tc.conf), nil)
			rt := harness.Attachment(fmt.Sprintf("egress-node-%d", i), topo.router, "net1")
			podBefore := readEgressState(t, topo.router)
			res, err := network.Add(ctx, rt)
			if err == nil {
				t.Fatalf("ADD succeeded with %v; want it refused: %s", res.IPs, tc.want)
			}
			if code := harness.CNIErrorCode(err); code != types.ErrInvalidNetworkConfig || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ADD: %v (code %d); want code 7 containing %q", err, code, tc.want)
			} else {
				t.Logf("ADD refused as expected: %v", err)
			}
			assertStatus(ctx, t, network, types.ErrInvalidNetworkConfig)
			if after := readNodeUplink(t, topo.node); after != nodeBefore {
				t.Errorf("the refused ADD changed the node's namespace:\n%s\nwas\n%s", after, nodeBefore)
			}
			if after := readEgressState(t, topo.router); !slices.Equal(after.links, podBefore.links) || after.rules != 0 || after.routes != 0 || after.chains != nil {
				t.Errorf("the refused ADD changed the pod's namespace: %+v, was %+v", after, podBefore)
			}
			mustDel(ctx, t, network, rt)
		})
	}

	// Passthru on m1, which holds nothing of the node: the router works, and the node keeps m0.
	conf := netpool(map[string]any{"master": "m1", "mode": "passthru"})
	network := mustNetwork(t, topo.node, egressConflist(t, conf), nil)
	rt := harness.Attachment("egress-node-passthru", topo.router, "net1")
	assertStatus(ctx, t, network, 0)
	mustAdd(ctx, t, network, rt)
	assertReaches(ctx, t, topo.client, "tcp", netip.AddrPortFrom(a.routerCluster, 8080), "dest", netip.AddrPortFrom(a.dest, 80), a.router.Addr())
	mustCheck(ctx, t, network, rt)
	if after := readNodeUplink(t, topo.node); after != nodeBefore {
		t.Errorf("a router on m1 changed the node's uplink:\n%s\nwas\n%s", after, nodeBefore)
	}
	mustDel(ctx, t, network, rt)
	assertEgressClean(t, topo.router, "net1")
}

// readNodeUplink describes what makes the node reachable: its links (name, kind, MAC), every
// address but the IPv6 link-local ones (which the kernel adds in its own time) and every default
// route, in all tables.
func readNodeUplink(t *testing.T, node ns.NetNS) string {
	t.Helper()
	var lines []string
	must(t, node.Do(func(ns.NetNS) error {
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		for _, l := range links {
			lines = append(lines, fmt.Sprintf("link %s %s %s", l.Attrs().Name, l.Type(), l.Attrs().HardwareAddr))
		}
		addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if !a.IP.IsLinkLocalUnicast() {
				lines = append(lines, fmt.Sprintf("addr %s on %d", a.IPNet, a.LinkIndex))
			}
		}
		for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
			routes, err := netlink.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
			if err != nil {
				return err
			}
			for _, r := range routes {
				if r.Dst == nil || r.Dst.IP.IsUnspecified() {
					lines = append(lines, fmt.Sprintf("default table %d via %s dev %d", r.Table, r.Gw, r.LinkIndex))
				}
			}
		}
		return nil
	}))
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
