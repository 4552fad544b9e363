package egressrouter

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/containernetworking/plugins/pkg/utils/sysctl"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// RouteTable holds the egress routes, and RulePriority is the priority of the rules that send
// traffic arriving on the cluster interface there. Both are fixed: one router per network namespace.
const (
	RouteTable   = 7099
	RulePriority = 7099
)

// policyRoutes are the routes of RouteTable for one address: its subnet on the egress link, and the
// default through its gateway.
func policyRoutes(link netlink.Link, a Address) []netlink.Route {
	index := link.Attrs().Index
	bits := a.Prefix.Addr().BitLen()
	return []netlink.Route{
		{
			LinkIndex: index, Table: RouteTable, Scope: netlink.SCOPE_LINK,
			Dst: ipNet(a.Prefix.Masked()), Src: a.Prefix.Addr().AsSlice(),
		},
		{
			LinkIndex: index, Table: RouteTable, Scope: netlink.SCOPE_UNIVERSE,
			Dst: &net.IPNet{IP: make(net.IP, bits/8), Mask: net.CIDRMask(0, bits)}, Gw: a.Gateway.AsSlice(),
		},
	}
}

func policyRule(family int, clusterIf string) *netlink.Rule {
	rule := netlink.NewRule()
	rule.Family = family
	rule.IifName = clusterIf
	rule.Table = RouteTable
	rule.Priority = RulePriority
	return rule
}

func familyOf(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

// installRouting routes forwarded traffic by policy, in the current namespace: traffic arriving on
// the cluster interface looks up RouteTable, whose default is the gateway through the egress link.
// The main table, and with it the cluster interface's default route, is left alone, so replies to
// clients and the pod's own traffic still leave by the cluster interface.
func installRouting(r *Router, link netlink.Link) error {
	for _, a := range r.Addresses {
		for _, route := range policyRoutes(link, a) {
			if err := netlink.RouteAdd(&route); err != nil {
				return fmt.Errorf("failed to add route %s via %v dev %s table %d: %w", route.Dst, route.Gw, link.Attrs().Name, RouteTable, err)
			}
		}
		if err := netlink.RuleAdd(policyRule(familyOf(a.Prefix.Addr()), r.ClusterInterface)); err != nil {
			return fmt.Errorf("failed to add rule iif %s lookup %d: %w", r.ClusterInterface, RouteTable, err)
		}
	}
	return enableForwarding(r, link.Attrs().Name)
}

// enableForwarding turns on forwarding for the two interfaces only. IPv4 forwards per input
// interface; IPv6 forwards only with net.ipv6.conf.all.forwarding on, so that one is set (in the
// pod's namespace, where nothing else depends on it). The egress link gets a loose reverse-path
// filter: replies from destinations behind the gateway arrive on it while the main table routes
// their sources out of the cluster interface, and strict filtering would drop them.
func enableForwarding(r *Router, egressIf string) error {
	var keys [][2]string
	if _, ok := r.AddressOf(true); ok {
		keys = append(keys,
			[2]string{"net/ipv4/conf/" + r.ClusterInterface + "/forwarding", "1"},
			[2]string{"net/ipv4/conf/" + egressIf + "/forwarding", "1"},
			[2]string{"net/ipv4/conf/" + egressIf + "/rp_filter", "2"})
	}
	if _, ok := r.AddressOf(false); ok {
		keys = append(keys,
			[2]string{"net/ipv6/conf/all/forwarding", "1"},
			[2]string{"net/ipv6/conf/" + r.ClusterInterface + "/forwarding", "1"},
			[2]string{"net/ipv6/conf/" + egressIf + "/forwarding", "1"})
	}
	for _, kv := range keys {
		if _, err := sysctl.Sysctl(kv[0], kv[1]); err != nil {
			return fmt.Errorf("failed to set %s=%s: %w", kv[0], kv[1], err)
		}
	}
	return nil
}

// removeRouting deletes every rule at RulePriority that looks up RouteTable and every route left in
// RouteTable (the routes on the egress link go with the link). Missing ones are not errors.
func removeRouting() error {
	var errs []error
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := netlink.RuleListFiltered(family, &netlink.Rule{Table: RouteTable, Priority: RulePriority},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PRIORITY)
		if err != nil {
			errs = append(errs, fmt.Errorf("failed to list rules: %w", err))
			continue
		}
		for i := range rules {
			if err := netlink.RuleDel(&rules[i]); err != nil && !errors.Is(err, unix.ENOENT) && !os.IsNotExist(err) {
				errs = append(errs, fmt.Errorf("failed to delete rule lookup %d: %w", RouteTable, err))
			}
		}
		routes, err := netlink.RouteListFiltered(family, &netlink.Route{Table: RouteTable}, netlink.RT_FILTER_TABLE)
		if err != nil {
			errs = append(errs, fmt.Errorf("failed to list routes of table %d: %w", RouteTable, err))
			continue
		}
		for i := range routes {
			if err := netlink.RouteDel(&routes[i]); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("failed to delete route %s table %d: %w", routes[i].Dst, RouteTable, err))
			}
		}
	}
	return errors.Join(errs...)
}
