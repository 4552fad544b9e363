package e2e

import (
	"context"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/netpool/netpool/cni-plugin/egressrouter"
	"github.com/netpool/netpool/test/harness"
)

// TestEgressRouterDualStack attaches one router with an address of each family, no fallback and a
// private-mode macvlan: both families redirect, both reject what no rule matches, and CHECK, GC,
// STATUS and DEL work through libcni.
func TestEgressRouterDualStack(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ctx := testContext(t)
	topo := newEgressTopology(t)
	for _, a := range []egressAddrs{egressV4, egressV6} {
		serveTCP(t, topo.dest, netip.AddrPortFrom(a.dest, 80), "dest")
	}
	network := mustNetwork(t, topo.node, egressConflist(t, egressConf{addrs: []egressAddrs{egressV4, egressV6}, mode: "private"}.json(t)), nil)
	rt := harness.Attachment("egress-dualstack", topo.router, "net1")
	res := mustAdd(ctx, t, network, rt)
	must(t, topo.router.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName("net1")
		if err != nil {
			return err
		}
		if mv, ok := link.(*netlink.Macvlan); !ok || mv.Mode != netlink.MACVLAN_MODE_PRIVATE {
			t.Errorf("net1 is %T %+v, want a private-mode macvlan", link, link)
		}
		return nil
	}))
	if got := resultIPs(t, res); len(got) != 2 || got[0] != egressV4.router || got[1] != egressV6.router {
		t.Fatalf("result IPs %v, want %s and %s", got, egressV4.router, egressV6.router)
	}
	assertKernelAddrs(t, topo.router, "net1", []netip.Prefix{egressV4.router, egressV6.router})
	for _, a := range []egressAddrs{egressV4, egressV6} {
		assertReaches(ctx, t, topo.client, "tcp", netip.AddrPortFrom(a.routerCluster, 8080), "dest", netip.AddrPortFrom(a.dest, 80), a.router.Addr())
		assertRefused(ctx, t, topo.client, "tcp", netip.AddrPortFrom(a.routerCluster, 7777))
	}
	mustCheck(ctx, t, network, rt)
	if err := network.Status(ctx); err != nil {
		t.Errorf("STATUS: %v", err)
	}
	if err := network.GC(ctx, []types.GCAttachment{{ContainerID: rt.ContainerID, IfName: rt.IfName}}); err != nil {
		t.Errorf("GC: %v", err)
	}
	mustCheck(ctx, t, network, rt) // GC of a valid attachment leaves it alone
	mustDel(ctx, t, network, rt)
	assertEgressClean(t, topo.router, "net1")
}

// TestEgressRouterOpenShiftConfig attaches a router from the config OpenShift's operator writes
// (ip.addresses, ip.gateway, ip.destinations strings, interfaceArgs), with no master: the plugin
// takes the interface of the node's default route.
func TestEgressRouterOpenShiftConfig(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ctx := testContext(t)
	topo := newEgressTopology(t)
	a := egressV4
	serveTCP(t, topo.dest, netip.AddrPortFrom(a.dest, 80), "dest")
	serveTCP(t, topo.fallback, netip.AddrPortFrom(a.fb, 7777), "fallback")
	// The node's default route leads out of m0.
	mustAddr(t, topo.node, "m0", netip.MustParsePrefix("192.0.2.200/24"))
	mustDefaultRoute(t, topo.node, "m0", a.gateway)

	conf := map[string]any{
		"type":          "netpool-egress-router",
		"interfaceType": "macvlan",
		"interfaceArgs": map[string]any{"mode": "bridge", "mtu": "1400"},
		"ip": map[string]any{
			"addresses":    []string{a.router.String()},
			"gateway":      a.gateway.String(),
			"destinations": []string{"8080 TCP " + a.dest.String() + " 80", a.fb.String()},
		},
	}
	network := mustNetwork(t, topo.node, egressConflist(t, conf), nil)
	rt := harness.Attachment("egress-openshift", topo.router, "net1")
	res := mustAdd(ctx, t, network, rt)
	if got := resultIPs(t, res); len(got) != 1 || got[0] != a.router {
		t.Fatalf("result IPs %v, want %s", got, a.router)
	}
	var parent, mtu, m0 int
	must(t, topo.router.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName("net1")
		if err != nil {
			return err
		}
		parent, mtu = link.Attrs().ParentIndex, link.Attrs().MTU
		return nil
	}))
	must(t, topo.node.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName("m0")
		if err == nil {
			m0 = link.Attrs().Index
		}
		return err
	}))
	if parent != m0 || mtu != 1400 {
		t.Errorf("net1 has parent index %d and MTU %d; want m0 (index %d, the default route's) and interfaceArgs.mtu 1400", parent, mtu, m0)
	}
	assertReaches(ctx, t, topo.client, "tcp", netip.AddrPortFrom(a.routerCluster, 8080), "dest", netip.AddrPortFrom(a.dest, 80), a.router.Addr())
	assertReaches(ctx, t, topo.client, "tcp", netip.AddrPortFrom(a.routerCluster, 7777), "fallback", netip.AddrPortFrom(a.fb, 7777), a.router.Addr())
	mustCheck(ctx, t, network, rt)
	mustDel(ctx, t, network, rt)
	assertEgressClean(t, topo.router, "net1")
}

// TestEgressRouterErrors runs the plugin binary as a runtime would with configs and environments it
// must refuse: each gets CNI error JSON with its code and a specific message, and the pod's
// namespace is left untouched.
func TestEgressRouterErrors(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ctx := testContext(t)
	node, pod := mustNetNS(t), mustNetNS(t)
	must(t, harness.AddVethPair(node, "m0", "m0p"))
	must(t, harness.AddVethPair(pod, "eth0", "eth0p"))
	plugin := filepath.Join(harness.MustBinDir(t), "netpool-egress-router")

	good := func() map[string]any {
		return map[string]any{
			"cniVersion": "1.1.0", "name": "egress-errors", "type": "netpool-egress-router",
			"interface": map[string]any{"master": "m0"},
			"addresses": []any{map[string]any{"ip": "192.0.2.99/24", "gateway": "192.0.2.1"}},
		}
	}
	with := func(k string, v any) map[string]any { c := good(); c[k] = v; return c }
	for _, tc := range []struct {
		name, verb string
		conf       any
		code       uint
		want       string
	}{
		{"not JSON", "ADD", "{", types.ErrDecodingFailure, ""},
		{"gateway outside the subnet", "ADD", with("addresses", []any{map[string]any{"ip": "192.0.2.99/24", "gateway": "198.51.100.1"}}),
			types.ErrInvalidNetworkConfig, "gateway 198.51.100.1 of address 192.0.2.99/24 is not inside its subnet"},
		{"bad protocol", "ADD", with("redirect", map[string]any{"rules": []any{map[string]any{"destinationIP": "192.0.2.9", "port": 80, "protocol": "icmp"}}}),
			types.ErrInvalidNetworkConfig, `protocol "icmp" is not one of TCP, UDP, SCTP`},
		{"missing master", "ADD", with("interface", map[string]any{"master": "nope0"}),
			egressrouter.CodeMasterNotFound, `master "nope0" in the host namespace`},
		{"no master and no default route", "ADD", with("interface", map[string]any{}),
			egressrouter.CodeMasterNotFound, "no default route to take it from"},
		{"missing cluster interface", "ADD", with("clusterInterface", "eth9"),
			egressrouter.CodeClusterInterfaceNotFound, "eth9"},
		{"CHECK without prevResult", "CHECK", good(), types.ErrInvalidNetworkConfig, "CHECK needs a prevResult"},
		{"STATUS with a missing master", "STATUS", with("interface", map[string]any{"master": "nope0"}),
			types.ErrPluginNotAvailable, `master "nope0"`},
		{"GC of a bad config", "GC", with("addresses", []any{}), types.ErrInvalidNetworkConfig, "at least one address is required"},
		{"DEL without a name", "DEL", map[string]any{"cniVersion": "1.1.0", "type": "netpool-egress-router"},
			types.ErrInvalidNetworkConfig, "missing network name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdin := []byte(nil)
			if s, ok := tc.conf.(string); ok {
				stdin = []byte(s)
			} else {
				var err error
				stdin, err = json.Marshal(tc.conf)
				must(t, err)
			}
			before := readEgressState(t, pod)
			var err error
			must(t, node.Do(func(ns.NetNS) error {
				_, err = harness.Exec(context.WithoutCancel(ctx), plugin, harness.Invocation{
					Command: tc.verb, ContainerID: "egress-errors", IfName: "net1", NetNS: pod.Path(), Config: stdin,
				})
				return nil
			}))
			if code := harness.CNIErrorCode(err); code != tc.code || !strings.Contains(errString(err), tc.want) {
				t.Errorf("%s: %v (code %d); want code %d containing %q", tc.verb, err, code, tc.code, tc.want)
			} else {
				t.Logf("%s refused as expected: %v", tc.verb, err)
			}
			if after := readEgressState(t, pod); strings.Join(after.links, ",") != strings.Join(before.links, ",") ||
				after.rules != 0 || after.routes != 0 || after.chains != nil {
				t.Errorf("refused %s changed the pod's namespace: %+v, was %+v", tc.verb, after, before)
			}
		})
	}
}

// TestEgressRouterVersion asks the binary for its versions, as a runtime does before GC and STATUS.
func TestEgressRouterVersion(t *testing.T) {
	out, err := harness.Exec(testContext(t), filepath.Join(harness.MustBinDir(t), "netpool-egress-router"),
		harness.Invocation{Command: "VERSION", Config: []byte(`{"cniVersion":"1.1.0"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		CNIVersion        string   `json:"cniVersion"`
		SupportedVersions []string `json:"supportedVersions"`
	}
	if err := json.Unmarshal(out.Stdout, &v); err != nil {
		t.Fatalf("VERSION printed %q: %v", out.Stdout, err)
	}
	if !slices.Contains(v.SupportedVersions, "1.1.0") || !slices.Contains(v.SupportedVersions, "0.4.0") {
		t.Errorf("VERSION lists %v, want 0.4.0 (OpenShift's NADs) through 1.1.0", v.SupportedVersions)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestEgressRouterIfNameTaken runs ADD for a CNI_IFNAME the pod already has: ADD fails naming it,
// before it changes anything, and the existing interface survives.
func TestEgressRouterIfNameTaken(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	node, pod := mustNetNS(t), mustNetNS(t)
	must(t, harness.AddVethPair(node, "m0", "m0p"))
	must(t, harness.AddVethPair(pod, "eth0", "net1"))
	conf, err := json.Marshal(map[string]any{
		"cniVersion": "1.1.0", "name": "egress-taken", "type": "netpool-egress-router",
		"interface": map[string]any{"master": "m0"},
		"addresses": []any{map[string]any{"ip": "192.0.2.99/24", "gateway": "192.0.2.1"}},
	})
	must(t, err)
	plugin := filepath.Join(harness.MustBinDir(t), "netpool-egress-router")
	must(t, node.Do(func(ns.NetNS) error {
		_, err = harness.Exec(testContext(t), plugin, harness.Invocation{
			Command: "ADD", ContainerID: "egress-taken", IfName: "net1", NetNS: pod.Path(), Config: conf,
		})
		return nil
	}))
	if err == nil || !strings.Contains(err.Error(), "interface net1 already exists") {
		t.Fatalf("ADD over an existing net1: %v; want it refused naming net1", err)
	}
	must(t, pod.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName("net1")
		if err == nil && link.Type() != "veth" {
			t.Errorf("net1 is now a %s, want the pod's own veth", link.Type())
		}
		return err
	}))
	if st := readEgressState(t, pod); st.rules != 0 || st.routes != 0 || st.chains != nil {
		t.Errorf("refused ADD left state behind: %+v", st)
	}
}
