package egressrouter

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// refuseNodeConflicts refuses, in the node's namespace (the current one), a config whose router
// would take the node's own network. Anyone who may write a NAD may write this config, so it is
// untrusted:
//   - a router address that the node's namespace holds on any interface: the ARP probe and DAD
//     cannot see the node's own addresses, so the router would take the node's address over;
//   - passthru on a master that holds the node's addresses (other than the IPv6 link-local one the
//     kernel gives every interface) or a default route, in any table: the macvlan would take the
//     whole interface, and the node would be off its network.
//
// Both are config errors (code 7) naming the field.
func refuseNodeConflicts(r *Router, master netlink.Link) error {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("failed to list the node's addresses: %w", err)
	}
	for i, a := range r.Addresses {
		for _, h := range addrs {
			if ip, ok := netip.AddrFromSlice(h.IP); ok && ip.Unmap() == a.Prefix.Addr() {
				return invalid("%s %s is an address of the node itself (on %s); the router would take it over from the node",
					r.form.addressField(i), a.Prefix.Addr(), linkName(h.LinkIndex))
			}
		}
	}
	if r.MacvlanMode != "passthru" {
		return nil
	}
	name, index := master.Attrs().Name, master.Attrs().Index
	for _, h := range addrs {
		ip, ok := netip.AddrFromSlice(h.IP)
		if h.LinkIndex != index || !ok || (ip.Is6() && ip.IsLinkLocalUnicast()) {
			continue
		}
		return invalid("%s passthru on %s %s: %s holds the node's address %s, and a passthru macvlan would take the interface from the node",
			r.form.modeField(), r.form.masterField(), name, name, h.IPNet)
	}
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := netlink.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return fmt.Errorf("failed to list the node's routes: %w", err)
		}
		for _, rt := range routes {
			if isDefault(rt) && usesLink(rt, index) {
				return invalid("%s passthru on %s %s: the node's default route (table %d) leaves by %s, and a passthru macvlan would take the interface from the node",
					r.form.modeField(), r.form.masterField(), name, rt.Table, name)
			}
		}
	}
	return nil
}

func isDefault(rt netlink.Route) bool {
	if rt.Dst == nil {
		return true
	}
	ones, _ := rt.Dst.Mask.Size()
	return ones == 0
}

// usesLink reports whether rt leaves by the link of index, directly or as one of its next hops.
func usesLink(rt netlink.Route, index int) bool {
	if rt.LinkIndex == index {
		return true
	}
	for _, hop := range rt.MultiPath {
		if hop.LinkIndex == index {
			return true
		}
	}
	return false
}

func linkName(index int) string {
	if link, err := netlink.LinkByIndex(index); err == nil {
		return link.Attrs().Name
	}
	return fmt.Sprintf("interface %d", index)
}
