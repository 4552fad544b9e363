package e2e

import (
	"encoding/json"
	"net"
	"net/netip"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/utils/sysctl"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// egressTopology is the world an egress router lives in, each part its own network namespace:
//
//	client (c0) ---- (eth0) router (net1, macvlan on node's m0) ... node m0 ==veth== ext bridge br0
//	                                                                 br0 ---- gw     (the gateway; holds "far" on lo)
//	                                                                 br0 ---- dest   (TCP and UDP servers)
//	                                                                 br0 ---- fb     (the fallback)
//
// The router's cluster side is a veth standing in for the pod's eth0, with its default route via
// the client side, as a pod's is via its node. The plugin runs in node, where it finds master m0.
type egressTopology struct {
	node, router, client, ext, gw, dest, fallback ns.NetNS
}

// Addresses of the topology, per family.
type egressAddrs struct {
	client, routerCluster netip.Addr   // the cluster side
	clusterPrefix         int          // its prefix length
	router                netip.Prefix // the router's egress address, claimed by the plugin
	gateway, dest, fb     netip.Addr   // hosts on the external L2
	far                   netip.Addr   // behind the gateway, only reachable through it
	extPrefix             int
}

var egressV4 = egressAddrs{
	client: netip.MustParseAddr("10.250.0.1"), routerCluster: netip.MustParseAddr("10.250.0.2"), clusterPrefix: 24,
	router:  netip.MustParsePrefix("192.0.2.99/24"),
	gateway: netip.MustParseAddr("192.0.2.1"), dest: netip.MustParseAddr("192.0.2.10"), fb: netip.MustParseAddr("192.0.2.30"),
	far: netip.MustParseAddr("203.0.113.26"), extPrefix: 24,
}

var egressV6 = egressAddrs{
	client: netip.MustParseAddr("fd00:250::1"), routerCluster: netip.MustParseAddr("fd00:250::2"), clusterPrefix: 64,
	router:  netip.MustParsePrefix("fd00:251::99/64"),
	gateway: netip.MustParseAddr("fd00:251::1"), dest: netip.MustParseAddr("fd00:251::10"), fb: netip.MustParseAddr("fd00:251::30"),
	far: netip.MustParseAddr("2001:db8:26::26"), extPrefix: 64,
}

func newEgressTopology(t *testing.T) *egressTopology {
	t.Helper()
	topo := &egressTopology{
		node: mustNetNS(t), router: mustNetNS(t), client: mustNetNS(t), ext: mustNetNS(t),
		gw: mustNetNS(t), dest: mustNetNS(t), fallback: mustNetNS(t),
	}
	must(t, topo.ext.Do(func(ns.NetNS) error {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
		if err := netlink.LinkAdd(br); err != nil {
			return err
		}
		return netlink.LinkSetUp(br)
	}))
	// The macvlan master: a veth end in node whose peer is a port of the external bridge.
	mustVeth(t, topo.node, "m0", topo.ext, "m0p")
	mustEnslave(t, topo.ext, "m0p")
	for _, h := range []struct {
		netns ns.NetNS
		port  string
		pick  func(egressAddrs) netip.Addr
	}{
		{topo.gw, "pgw", func(a egressAddrs) netip.Addr { return a.gateway }},
		{topo.dest, "pdest", func(a egressAddrs) netip.Addr { return a.dest }},
		{topo.fallback, "pfb", func(a egressAddrs) netip.Addr { return a.fb }},
	} {
		mustVeth(t, h.netns, "eth0", topo.ext, h.port)
		mustEnslave(t, topo.ext, h.port)
		for _, a := range []egressAddrs{egressV4, egressV6} {
			mustAddr(t, h.netns, "eth0", netip.PrefixFrom(h.pick(a), a.extPrefix))
		}
	}
	for _, a := range []egressAddrs{egressV4, egressV6} {
		mustAddr(t, topo.gw, "lo", netip.PrefixFrom(a.far, a.far.BitLen()))
	}
	must(t, topo.gw.Do(func(ns.NetNS) error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	}))

	// The cluster side. The router's default route goes to the client side, as a pod's goes to its
	// node, and the client routes everything to the router, so that only the router's filter stands
	// between the external network and the client.
	mustVeth(t, topo.router, "eth0", topo.client, "c0")
	for _, a := range []egressAddrs{egressV4, egressV6} {
		mustAddr(t, topo.router, "eth0", netip.PrefixFrom(a.routerCluster, a.clusterPrefix))
		mustAddr(t, topo.client, "c0", netip.PrefixFrom(a.client, a.clusterPrefix))
		mustDefaultRoute(t, topo.router, "eth0", a.client)
		mustDefaultRoute(t, topo.client, "c0", a.routerCluster)
	}
	// Strict reverse-path filtering on the cluster side; the router must work with it.
	for _, netns := range []ns.NetNS{topo.router, topo.client} {
		must(t, netns.Do(func(ns.NetNS) error {
			for _, key := range []string{"net/ipv4/conf/all/rp_filter", "net/ipv4/conf/default/rp_filter"} {
				if _, err := sysctl.Sysctl(key, "1"); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	must(t, topo.router.Do(func(ns.NetNS) error {
		_, err := sysctl.Sysctl("net/ipv4/conf/eth0/rp_filter", "1")
		return err
	}))
	return topo
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// mustVeth creates the veth name in a with its peer in b, both up.
func mustVeth(t *testing.T, a ns.NetNS, name string, b ns.NetNS, peer string) {
	t.Helper()
	must(t, a.Do(func(ns.NetNS) error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer, PeerNamespace: netlink.NsFd(int(b.Fd()))}
		if err := netlink.LinkAdd(veth); err != nil {
			return err
		}
		return setUp(name)
	}))
	must(t, b.Do(func(ns.NetNS) error { return setUp(peer) }))
}

func setUp(name string) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(link)
}

func mustEnslave(t *testing.T, ext ns.NetNS, port string) {
	t.Helper()
	must(t, ext.Do(func(ns.NetNS) error {
		br, err := netlink.LinkByName("br0")
		if err != nil {
			return err
		}
		link, err := netlink.LinkByName(port)
		if err != nil {
			return err
		}
		return netlink.LinkSetMaster(link, br)
	}))
}

// mustAddr adds p to ifName without duplicate address detection: the test's own hosts need not wait.
func mustAddr(t *testing.T, netns ns.NetNS, ifName string, p netip.Prefix) {
	t.Helper()
	must(t, netns.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName(ifName)
		if err != nil {
			return err
		}
		ipn := &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
		return netlink.AddrAdd(link, &netlink.Addr{IPNet: ipn, Flags: unix.IFA_F_NODAD})
	}))
}

func mustDefaultRoute(t *testing.T, netns ns.NetNS, ifName string, gw netip.Addr) {
	t.Helper()
	must(t, netns.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName(ifName)
		if err != nil {
			return err
		}
		bits := gw.BitLen()
		dst := &net.IPNet{IP: make(net.IP, bits/8), Mask: net.CIDRMask(0, bits)}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: dst, Gw: gw.AsSlice()})
	}))
}

// egressConf is the router's network config in netpool's form, as the reconciler writes it.
type egressConf struct {
	addrs    []egressAddrs
	fallback bool
	mode     string // macvlan mode; empty means bridge
}

func (c egressConf) json(t *testing.T) map[string]any {
	t.Helper()
	var addresses, rules []any
	var fallback string
	for _, a := range c.addrs {
		addresses = append(addresses, map[string]any{"ip": a.router.String(), "gateway": a.gateway.String()})
		rules = append(rules,
			map[string]any{"destinationIP": a.dest.String(), "port": 8080, "protocol": "TCP", "targetPort": 80},
			map[string]any{"destinationIP": a.dest.String(), "port": 5353, "protocol": "UDP", "targetPort": 53},
			map[string]any{"destinationIP": a.far.String(), "port": 8081, "protocol": "TCP", "targetPort": 80},
			map[string]any{"destinationIP": a.dest.String(), "port": 9000, "protocol": "SCTP"},
		)
		if c.fallback && fallback == "" {
			fallback = a.fb.String()
		}
	}
	mode := c.mode
	if mode == "" {
		mode = "bridge"
	}
	redirect := map[string]any{"rules": rules}
	if fallback != "" {
		redirect["fallbackIP"] = fallback
	}
	return map[string]any{
		"type":             "netpool-egress-router",
		"interface":        map[string]any{"type": "macvlan", "master": "m0", "mode": mode, "mtu": 0},
		"clusterInterface": "eth0",
		"addresses":        addresses,
		"redirect":         redirect,
		"macSeed":          "e2e/" + t.Name(),
	}
}

// egressConflist wraps one plugin config in a conflist, as Multus does with a NAD's single config.
func egressConflist(t *testing.T, plugin map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": "egress-e2e", "plugins": []any{plugin}})
	must(t, err)
	return b
}
