package egressrouter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Check verifies that the namespace still holds what ADD installed: the macvlan (mode, MAC, up),
// every address (claimed, not tentative), the cluster interface, the policy rules and routes, and
// the nftables table rule for rule. The first difference is the error, code 111.
func Check(args *skel.CmdArgs) error {
	r, err := Parse(args.StdinData)
	if err != nil {
		return err
	}
	if err := checkPrevResult(args.StdinData, r, args.IfName); err != nil {
		return err
	}
	netns, err := ns.GetNS(args.Netns)
	if err != nil {
		return fmt.Errorf("failed to open network namespace %q: %w", args.Netns, err)
	}
	defer func() { _ = netns.Close() }() // a read-only handle: closing it cannot lose anything
	return netns.Do(func(ns.NetNS) error {
		link, err := checkLink(r, args.IfName)
		if err != nil {
			return err
		}
		if err := checkAddrs(link, r.Addresses); err != nil {
			return err
		}
		if err := checkRouting(r, link); err != nil {
			return err
		}
		conn, err := nftConn(netns)
		if err != nil {
			return err
		}
		return checkTable(conn, r, args.IfName)
	})
}

// checkPrevResult requires the prevResult the runtime cached from ADD to list ifName and the
// router's addresses, so that CHECK of a changed config fails instead of checking the new one.
func checkPrevResult(stdin []byte, r *Router, ifName string) error {
	conf := &types.PluginConf{}
	if err := json.Unmarshal(stdin, conf); err != nil {
		return invalid("failed to parse network config: %v", err)
	}
	if conf.RawPrevResult == nil {
		return invalid("CHECK needs a prevResult")
	}
	if err := version.ParsePrevResult(conf); err != nil {
		return invalid("failed to parse prevResult: %v", err)
	}
	prev, err := current.NewResultFromResult(conf.PrevResult)
	if err != nil {
		return invalid("failed to convert prevResult: %v", err)
	}
	found := false
	for _, i := range prev.Interfaces {
		found = found || i.Name == ifName
	}
	if !found {
		return fmt.Errorf("%w: prevResult lists no interface %s", ErrCheckFailed, ifName)
	}
	have := map[netip.Addr]bool{}
	for _, ipc := range prev.IPs {
		if a, ok := netip.AddrFromSlice(ipc.Address.IP); ok {
			have[a.Unmap()] = true
		}
	}
	for _, a := range r.Addresses {
		if !have[a.Prefix.Addr()] {
			return fmt.Errorf("%w: prevResult lacks the router's address %s", ErrCheckFailed, a.Prefix)
		}
	}
	return nil
}

func checkLink(r *Router, ifName string) (netlink.Link, error) {
	if _, err := netlink.LinkByName(r.ClusterInterface); err != nil {
		return nil, fmt.Errorf("%w: cluster interface %s: %w", ErrCheckFailed, r.ClusterInterface, err)
	}
	link, err := netlink.LinkByName(ifName)
	if err != nil {
		return nil, fmt.Errorf("%w: egress interface %s: %w", ErrCheckFailed, ifName, err)
	}
	mv, ok := link.(*netlink.Macvlan)
	if !ok {
		return nil, fmt.Errorf("%w: %s is a %s, not a macvlan", ErrCheckFailed, ifName, link.Type())
	}
	if mv.Mode != netlinkModes[r.MacvlanMode] {
		return nil, fmt.Errorf("%w: macvlan %s is in mode %d, want %s", ErrCheckFailed, ifName, mv.Mode, r.MacvlanMode)
	}
	if r.MAC != nil && r.MacvlanMode != "passthru" && !bytes.Equal(link.Attrs().HardwareAddr, r.MAC) {
		return nil, fmt.Errorf("%w: %s has MAC %s, want %s (from macSeed)", ErrCheckFailed, ifName, link.Attrs().HardwareAddr, r.MAC)
	}
	if link.Attrs().Flags&unix.IFF_UP == 0 {
		return nil, fmt.Errorf("%w: %s is down", ErrCheckFailed, ifName)
	}
	return link, nil
}

func checkAddrs(link netlink.Link, addrs []Address) error {
	have, err := netlink.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("failed to list addresses of %s: %w", link.Attrs().Name, err)
	}
	for _, want := range addrs {
		ok := false
		for _, a := range have {
			got, _ := netip.AddrFromSlice(a.IP)
			ones, _ := a.Mask.Size()
			if got.Unmap() == want.Prefix.Addr() && ones == want.Prefix.Bits() &&
				a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) == 0 {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("%w: %s does not hold %s", ErrCheckFailed, link.Attrs().Name, want.Prefix)
		}
	}
	return nil
}

// checkRouting requires, per family, the rule from the cluster interface and the table's subnet and
// default routes.
func checkRouting(r *Router, link netlink.Link) error {
	for _, a := range r.Addresses {
		family := familyOf(a.Prefix.Addr())
		rules, err := netlink.RuleListFiltered(family, &netlink.Rule{Table: RouteTable, Priority: RulePriority},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PRIORITY)
		if err != nil {
			return fmt.Errorf("failed to list rules: %w", err)
		}
		ok := false
		for _, rule := range rules {
			ok = ok || rule.IifName == r.ClusterInterface
		}
		if !ok {
			return fmt.Errorf("%w: no rule %d iif %s lookup %d for %s", ErrCheckFailed, RulePriority, r.ClusterInterface, RouteTable, a.Prefix)
		}
		routes, err := netlink.RouteListFiltered(family, &netlink.Route{Table: RouteTable}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return fmt.Errorf("failed to list routes of table %d: %w", RouteTable, err)
		}
		for _, want := range policyRoutes(link, a) {
			if !hasRoute(routes, want) {
				return fmt.Errorf("%w: table %d has no route %s via %v dev %s", ErrCheckFailed, RouteTable, want.Dst, want.Gw, link.Attrs().Name)
			}
		}
	}
	return nil
}

func hasRoute(routes []netlink.Route, want netlink.Route) bool {
	for _, r := range routes {
		if r.LinkIndex == want.LinkIndex && dstOf(r, want) == want.Dst.String() && r.Gw.Equal(want.Gw) {
			return true
		}
	}
	return false
}

// dstOf prints r's destination; netlink reports a default route with no Dst, so that one takes the
// default of want's family.
func dstOf(r netlink.Route, want netlink.Route) string {
	if r.Dst == nil {
		bits := len(want.Dst.IP) * 8
		return (&net.IPNet{IP: make(net.IP, bits/8), Mask: net.CIDRMask(0, bits)}).String()
	}
	return r.Dst.String()
}
