package e2e

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/netpool/netpool/cni-plugin/egressrouter"
	"github.com/netpool/netpool/test/harness"
)

// TestEgressRouter runs the egress router through libcni, as Multus would, in each IP family: the
// redirect rules, the source the destinations see, the fallback and its absence, the filter against
// the external network, address conflicts, CHECK against tampering, and a clean DEL.
func TestEgressRouter(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	for _, fam := range []struct {
		name  string
		addrs egressAddrs
	}{{"IPv4", egressV4}, {"IPv6", egressV6}} {
		t.Run(fam.name, func(t *testing.T) {
			t.Parallel()
			runEgressScenario(t, fam.addrs)
		})
	}
}

func runEgressScenario(t *testing.T, a egressAddrs) {
	ctx := testContext(t)
	topo := newEgressTopology(t)
	serveTCP(t, topo.dest, netip.AddrPortFrom(a.dest, 80), "dest")
	serveUDP(t, topo.dest, netip.AddrPortFrom(a.dest, 53), "dest-udp")
	serveTCP(t, topo.gw, netip.AddrPortFrom(a.far, 80), "far")
	serveTCP(t, topo.fallback, netip.AddrPortFrom(a.fb, 7777), "fallback")
	serveUDP(t, topo.fallback, netip.AddrPortFrom(a.fb, 5454), "fallback-udp")
	seedNeighbour(t, topo.dest, a.router.Addr())

	conf := egressConf{addrs: []egressAddrs{a}, fallback: true}.json(t)
	network := mustNetwork(t, topo.node, egressConflist(t, conf), nil)
	rt := harness.Attachment("egress-"+strings.ReplaceAll(t.Name(), "/", "-"), topo.router, "net1")
	res := mustAdd(ctx, t, network, rt)
	mac := assertEgressResult(t, res, topo.router, a)
	if got := neighbourMAC(t, topo.dest, a.router.Addr()); got != mac {
		t.Errorf("dest's neighbour entry for %s is %s after ADD, want the router's %s (gratuitous ARP / unsolicited NA)", a.router.Addr(), got, mac)
	}
	if got := defaultRouteLink(t, topo.router, a.router.Addr().Is4()); got != "eth0" {
		t.Errorf("router's default route is on %q after ADD, want it kept on eth0", got)
	}
	if got := readSysctl(t, topo.router, "net/ipv4/conf/eth0/rp_filter"); got != "1" {
		t.Errorf("router's eth0 rp_filter = %s after ADD, want the strict 1 the test set", got)
	}
	mustCheck(ctx, t, network, rt)

	router := func(port uint16) netip.AddrPort { return netip.AddrPortFrom(a.routerCluster, port) }
	src := a.router.Addr()
	t.Run("TCP rule reaches its destination and targetPort", func(t *testing.T) {
		assertReaches(ctx, t, topo.client, "tcp", router(8080), "dest", netip.AddrPortFrom(a.dest, 80), src)
	})
	t.Run("UDP rule reaches its destination and targetPort", func(t *testing.T) {
		assertReaches(ctx, t, topo.client, "udp", router(5353), "dest-udp", netip.AddrPortFrom(a.dest, 53), src)
	})
	t.Run("destination behind the gateway", func(t *testing.T) {
		assertReaches(ctx, t, topo.client, "tcp", router(8081), "far", netip.AddrPortFrom(a.far, 80), src)
	})
	t.Run("unmatched port reaches the fallback", func(t *testing.T) {
		assertReaches(ctx, t, topo.client, "tcp", router(7777), "fallback", netip.AddrPortFrom(a.fb, 7777), src)
		assertReaches(ctx, t, topo.client, "udp", router(5454), "fallback-udp", netip.AddrPortFrom(a.fb, 5454), src)
	})
	t.Run("SCTP rule installed", func(t *testing.T) {
		assertSCTPRule(t, topo.router, a)
	})
	t.Run("SCTP traffic", func(t *testing.T) {
		assertSCTPTraffic(ctx, t, topo, a)
	})
	t.Run("external host cannot connect into the cluster side", func(t *testing.T) {
		assertNoInbound(ctx, t, topo, a)
	})
	t.Run("second router claiming the address fails ADD", func(t *testing.T) {
		assertConflict(ctx, t, topo, a)
	})
	t.Run("CHECK fails after tampering", func(t *testing.T) {
		is4 := a.router.Addr().Is4()
		for _, tc := range []struct {
			what, want string
			do         func() error
		}{
			{"delete the policy rule", "no rule 7099", deletePolicyRule(is4)},
			{"delete the egress table's default route", "has no route", deletePolicyDefaultRoute(is4)},
			{"delete a DNAT rule", "chain prerouting holds", deleteNftRule(topo.router, "prerouting")},
			{"rewrite a DNAT rule's port in place", "differs at expression", rewriteNftPort(topo.router, "prerouting")},
			{"delete the forward filter's rule", "chain forward holds", deleteNftRule(topo.router, "forward")},
		} {
			tamper(t, topo.router, tc.what, tc.do)
			err := network.Check(ctx, rt)
			if code := harness.CNIErrorCode(err); code != egressrouter.CodeCheckFailed || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CHECK after %s: %v (code %d); want code %d mentioning %q", tc.what, err, code, egressrouter.CodeCheckFailed, tc.want)
			} else {
				t.Logf("CHECK after %s failed as expected: %v", tc.what, err)
			}
			// Restore with DEL and ADD, as a runtime would; the MAC must come back the same.
			mustDel(ctx, t, network, rt)
			if got := assertEgressResult(t, mustAdd(ctx, t, network, rt), topo.router, a); got != mac {
				t.Errorf("MAC after re-ADD is %s, want the stable %s", got, mac)
			}
			mustCheck(ctx, t, network, rt)
		}
	})
	t.Run("DEL leaves nothing behind and repeats", func(t *testing.T) {
		mustDel(ctx, t, network, rt)
		assertEgressClean(t, topo.router, "net1")
		mustDel(ctx, t, network, rt)
	})

	// Without a fallback, unmatched traffic is rejected, and the rules still work.
	noFallback := mustNetwork(t, topo.node, egressConflist(t, egressConf{addrs: []egressAddrs{a}}.json(t)), nil)
	mustAdd(ctx, t, noFallback, rt)
	t.Run("unmatched port rejected without a fallback", func(t *testing.T) {
		assertRefused(ctx, t, topo.client, "tcp", router(7777))
		assertRefused(ctx, t, topo.client, "udp", router(5454))
		assertReaches(ctx, t, topo.client, "tcp", router(8080), "dest", netip.AddrPortFrom(a.dest, 80), src)
	})
	mustDel(ctx, t, noFallback, rt)
	assertEgressClean(t, topo.router, "net1")

	// DEL of a namespace that is gone succeeds: there is nothing left to remove.
	if err := removeNetNS(topo.router); err != nil {
		t.Fatal(err)
	}
	mustDel(ctx, t, noFallback, rt)
}

// assertEgressResult checks the ADD result against the kernel: net1 with its MAC and sandbox, the
// router's address with its gateway, held by net1. It returns the MAC.
func assertEgressResult(t *testing.T, res *current.Result, router ns.NetNS, a egressAddrs) string {
	t.Helper()
	if len(res.Interfaces) != 1 || res.Interfaces[0].Name != "net1" || res.Interfaces[0].Sandbox != router.Path() {
		t.Fatalf("result interfaces %+v, want net1 in %s", res.Interfaces, router.Path())
	}
	mac, err := net.ParseMAC(res.Interfaces[0].Mac)
	if err != nil || mac[0]&0x02 == 0 || mac[0]&0x01 != 0 {
		t.Errorf("result MAC %q is not a locally administered unicast MAC derived from macSeed", res.Interfaces[0].Mac)
	}
	got := resultIPs(t, res)
	if len(got) != 1 || got[0] != a.router || res.IPs[0].Interface == nil || *res.IPs[0].Interface != 0 {
		t.Fatalf("result IPs %v, want %s on interface 0", got, a.router)
	}
	assertGateway(t, res, a.gateway)
	assertKernelAddrs(t, router, "net1", []netip.Prefix{a.router})
	var kernelMAC string
	must(t, router.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName("net1")
		if err != nil {
			return err
		}
		if link.Type() != "macvlan" {
			t.Errorf("net1 is a %s, want a macvlan", link.Type())
		}
		kernelMAC = link.Attrs().HardwareAddr.String()
		return nil
	}))
	if kernelMAC != res.Interfaces[0].Mac {
		t.Errorf("net1 has MAC %s, the result says %s", kernelMAC, res.Interfaces[0].Mac)
	}
	return kernelMAC
}

func assertSCTPRule(t *testing.T, router ns.NetNS, a egressAddrs) {
	t.Helper()
	want := "dnat SCTP 9000 -> " + netip.AddrPortFrom(a.dest, 9000).String()
	st := readEgressState(t, router)
	if !slices.Contains(st.chains["prerouting"], want) {
		t.Errorf("prerouting holds %q, want a rule %q", st.chains["prerouting"], want)
	}
}

// assertNoInbound has a host on the external network route the cluster side through the router's
// address and try to connect to a client server: the router's forward filter must stop it.
func assertNoInbound(ctx context.Context, t *testing.T, topo *egressTopology, a egressAddrs) {
	t.Helper()
	accepted := serveTCP(t, topo.client, netip.AddrPortFrom(a.client, 6000), "client")
	must(t, topo.dest.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		subnet := netip.PrefixFrom(a.client, a.clusterPrefix).Masked()
		dst := &net.IPNet{IP: subnet.Addr().AsSlice(), Mask: net.CIDRMask(subnet.Bits(), a.client.BitLen())}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: dst, Gw: a.router.Addr().AsSlice()})
	}))
	r, err := askOnce(ctx, topo.dest, "tcp", netip.AddrPortFrom(a.client, 6000))
	if err == nil {
		t.Fatalf("external host reached %s at %s through the router", r.name, r.local)
	}
	// Give a late SYN time to arrive before counting.
	time.Sleep(200 * time.Millisecond)
	if n := accepted.Load(); n != 0 {
		t.Fatalf("client server accepted %d connections from the external network", n)
	}
	t.Logf("external host could not connect into the cluster side: %v", err)
}

// assertConflict starts a second router, in a namespace of its own, that claims the first router's
// address: ADD must fail with code 110 and leave that namespace clean.
func assertConflict(ctx context.Context, t *testing.T, topo *egressTopology, a egressAddrs) {
	t.Helper()
	second := mustNetNS(t)
	must(t, second.Do(func(ns.NetNS) error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "eth0p"})
	}))
	conf := egressConf{addrs: []egressAddrs{a}}.json(t)
	conf["macSeed"] = "e2e/second"
	network := mustNetwork(t, topo.node, egressConflist(t, conf), nil)
	rt := harness.Attachment("egress-second", second, "net1")
	res, err := network.Add(ctx, rt)
	if err == nil {
		t.Fatalf("second router's ADD succeeded with %v; want address %s in use", res.IPs, a.router.Addr())
	}
	if code := harness.CNIErrorCode(err); code != egressrouter.CodeAddressInUse || !strings.Contains(err.Error(), a.router.Addr().String()) {
		t.Errorf("second router's ADD: %v (code %d); want code %d naming %s", err, code, egressrouter.CodeAddressInUse, a.router.Addr())
	} else {
		t.Logf("second router's ADD failed as expected: %v", err)
	}
	assertEgressClean(t, second, "net1")
	mustDel(ctx, t, network, rt)
}
