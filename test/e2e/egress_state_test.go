package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/utils/sysctl"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netpool/netpool/cni-plugin/egressrouter"
)

// egressState is what the plugin left in the router's namespace, read back with netlink and nftables.
type egressState struct {
	links  []string            // interface names
	rules  int                 // rules looking up the egress table, both families
	routes int                 // routes in the egress table, both families
	chains map[string][]string // nftables chain -> rule comments; nil without the table
}

func readEgressState(t *testing.T, netns ns.NetNS) egressState {
	t.Helper()
	var st egressState
	must(t, netns.Do(func(ns.NetNS) error {
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		for _, l := range links {
			st.links = append(st.links, l.Attrs().Name)
		}
		for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
			rules, err := netlink.RuleList(family)
			if err != nil {
				return err
			}
			for _, r := range rules {
				if r.Table == egressrouter.RouteTable || r.Priority == egressrouter.RulePriority {
					st.rules++
				}
			}
			routes, err := netlink.RouteListFiltered(family, &netlink.Route{Table: egressrouter.RouteTable}, netlink.RT_FILTER_TABLE)
			if err != nil {
				return err
			}
			st.routes += len(routes)
		}
		return nil
	}))
	conn, err := nftables.New(nftables.WithNetNSFd(int(netns.Fd())))
	must(t, err)
	chains, err := conn.ListChainsOfTableFamily(nftables.TableFamilyINet)
	must(t, err)
	for _, c := range chains {
		if c.Table.Name != egressrouter.TableName {
			continue
		}
		if st.chains == nil {
			st.chains = map[string][]string{}
		}
		rules, err := conn.GetRules(c.Table, c)
		must(t, err)
		st.chains[c.Name] = []string{}
		for _, r := range rules {
			comment, _ := userdata.GetString(r.UserData, userdata.TypeComment)
			st.chains[c.Name] = append(st.chains[c.Name], comment)
		}
	}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	must(t, err)
	for _, tb := range tables {
		if tb.Name == egressrouter.TableName && st.chains == nil {
			st.chains = map[string][]string{}
		}
	}
	return st
}

// assertEgressClean asserts that netns holds no trace of the plugin: no egress link, no rule or
// route of its table, no nftables table.
func assertEgressClean(t *testing.T, netns ns.NetNS, ifName string) {
	t.Helper()
	st := readEgressState(t, netns)
	for _, l := range st.links {
		if l == ifName || strings.HasPrefix(l, "npegr") {
			t.Errorf("link %s left behind (links %v)", l, st.links)
		}
	}
	if st.rules != 0 || st.routes != 0 {
		t.Errorf("%d rules and %d routes of table %d left behind", st.rules, st.routes, egressrouter.RouteTable)
	}
	if st.chains != nil {
		t.Errorf("nftables table inet %s left behind: %v", egressrouter.TableName, st.chains)
	}
}

// defaultRouteLink returns the interface of the main table's default route of addr's family in netns.
func defaultRouteLink(t *testing.T, netns ns.NetNS, is4 bool) string {
	t.Helper()
	family := netlink.FAMILY_V6
	if is4 {
		family = netlink.FAMILY_V4
	}
	var name string
	must(t, netns.Do(func(ns.NetNS) error {
		routes, err := netlink.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return err
		}
		for _, r := range routes {
			if r.Dst == nil || r.Dst.IP.IsUnspecified() {
				link, err := netlink.LinkByIndex(r.LinkIndex)
				if err != nil {
					return err
				}
				name = link.Attrs().Name
			}
		}
		return nil
	}))
	return name
}

func readSysctl(t *testing.T, netns ns.NetNS, key string) string {
	t.Helper()
	var v string
	must(t, netns.Do(func(ns.NetNS) error {
		var err error
		v, err = sysctl.Sysctl(key)
		return err
	}))
	return v
}

// seedNeighbour gives netns a stale neighbour entry for ip on eth0 with a MAC nobody has, so that the
// router's gratuitous ARP or unsolicited neighbour advertisement has something to correct.
func seedNeighbour(t *testing.T, netns ns.NetNS, ip netip.Addr) {
	t.Helper()
	must(t, netns.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		family := netlink.FAMILY_V6
		if ip.Is4() {
			family = netlink.FAMILY_V4
		}
		return netlink.NeighAdd(&netlink.Neigh{LinkIndex: link.Attrs().Index, Family: family, State: netlink.NUD_STALE,
			IP: ip.AsSlice(), HardwareAddr: net.HardwareAddr{0x02, 0, 0, 0, 0xde, 0xad}})
	}))
}

func neighbourMAC(t *testing.T, netns ns.NetNS, ip netip.Addr) string {
	t.Helper()
	var mac string
	must(t, netns.Do(func(ns.NetNS) error {
		neighs, err := netlink.NeighList(0, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, n := range neighs {
			if got, ok := netip.AddrFromSlice(n.IP); ok && got.Unmap() == ip {
				mac = n.HardwareAddr.String()
			}
		}
		return nil
	}))
	return mac
}

// tamper runs f inside netns, for the CHECK tests.
func tamper(t *testing.T, netns ns.NetNS, what string, f func() error) {
	t.Helper()
	if err := netns.Do(func(ns.NetNS) error { return f() }); err != nil {
		t.Fatalf("failed to tamper (%s): %v", what, err)
	}
}

func deletePolicyRule(is4 bool) func() error {
	return func() error {
		family := netlink.FAMILY_V6
		if is4 {
			family = netlink.FAMILY_V4
		}
		rules, err := netlink.RuleListFiltered(family, &netlink.Rule{Table: egressrouter.RouteTable}, netlink.RT_FILTER_TABLE)
		if err != nil || len(rules) == 0 {
			return fmt.Errorf("no rule to delete (%v)", err)
		}
		return netlink.RuleDel(&rules[0])
	}
}

func deletePolicyDefaultRoute(is4 bool) func() error {
	return func() error {
		family := netlink.FAMILY_V6
		if is4 {
			family = netlink.FAMILY_V4
		}
		routes, err := netlink.RouteListFiltered(family, &netlink.Route{Table: egressrouter.RouteTable}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return err
		}
		for i := range routes {
			if routes[i].Gw != nil {
				return netlink.RouteDel(&routes[i])
			}
		}
		return fmt.Errorf("no default route in table %d: %v", egressrouter.RouteTable, routes)
	}
}

// deleteNftRule deletes the first rule of chain in the router's table.
func deleteNftRule(netns ns.NetNS, chain string) func() error {
	return func() error {
		conn, err := nftables.New(nftables.WithNetNSFd(int(netns.Fd())))
		if err != nil {
			return err
		}
		table := &nftables.Table{Name: egressrouter.TableName, Family: nftables.TableFamilyINet}
		rules, err := conn.GetRules(table, &nftables.Chain{Name: chain, Table: table})
		if err != nil || len(rules) == 0 {
			return fmt.Errorf("no rule in chain %s to delete (%v)", chain, err)
		}
		if err := conn.DelRule(rules[0]); err != nil {
			return err
		}
		return conn.Flush()
	}
}

// rewriteNftPort changes, in place, the port the first rule of chain matches: same comment, same
// number of expressions, so only an expression-by-expression CHECK notices.
func rewriteNftPort(netns ns.NetNS, chain string) func() error {
	return func() error {
		conn, err := nftables.New(nftables.WithNetNSFd(int(netns.Fd())))
		if err != nil {
			return err
		}
		table := &nftables.Table{Name: egressrouter.TableName, Family: nftables.TableFamilyINet}
		c := &nftables.Chain{Name: chain, Table: table}
		rules, err := conn.GetRules(table, c)
		if err != nil || len(rules) == 0 {
			return fmt.Errorf("no rule in chain %s to rewrite (%v)", chain, err)
		}
		r := rules[0]
		for _, e := range r.Exprs {
			if cmp, ok := e.(*expr.Cmp); ok && len(cmp.Data) == 2 {
				cmp.Data = []byte{0x1f, 0x91} // 8081 instead of the rule's 8080
				conn.ReplaceRule(&nftables.Rule{Table: table, Chain: c, Handle: r.Handle, Exprs: r.Exprs, UserData: r.UserData})
				return conn.Flush()
			}
		}
		return fmt.Errorf("rule 0 of chain %s matches no port: %v", chain, r.Exprs)
	}
}
