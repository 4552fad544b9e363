package egressrouter

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// One egress router per pod. The policy routing table, its rules and the nftables table are the
// namespace's, not an attachment's, so a second egress attachment of the same pod could not have
// its own; ADD refuses it before it changes anything (code 114), and DEL of an attachment leaves
// them alone while another attachment's egress interface still uses them. Without that, the DEL
// that a runtime runs after the refused ADD would remove the first attachment's router.

// routerState describes what of an egress router the current namespace holds ("" for nothing):
// whose it is, when its egress interface still exists, and which pieces remain.
func routerState(conn *nftables.Conn) (string, error) {
	owner, err := routerOwner(conn, "")
	if err != nil {
		return "", err
	}
	var pieces []string
	rules, routes, err := countRouting()
	if err != nil {
		return "", err
	}
	if rules > 0 {
		pieces = append(pieces, fmt.Sprintf("policy rules at priority %d: %d", RulePriority, rules))
	}
	if routes > 0 {
		pieces = append(pieces, fmt.Sprintf("routes in table %d: %d", RouteTable, routes))
	}
	found, err := hasTable(conn)
	if err != nil {
		return "", err
	}
	if found {
		pieces = append(pieces, "nftables table inet "+TableName)
	}
	switch {
	case len(pieces) == 0:
		return "", nil
	case owner != "":
		return fmt.Sprintf("the egress router of %s (%s)", owner, strings.Join(pieces, ", ")), nil
	default:
		return fmt.Sprintf("what an egress router left (%s), whose interface is gone; a DEL removes it", strings.Join(pieces, ", ")), nil
	}
}

// routerOwner returns the egress interface, other than except, that the namespace's router state
// belongs to and that still exists: the link of a route in RouteTable, or the output interface of
// the nftables table's SNAT rules. "" means no live interface owns it.
func routerOwner(conn *nftables.Conn, except string) (string, error) {
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := netlink.RouteListFiltered(family, &netlink.Route{Table: RouteTable}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return "", fmt.Errorf("failed to list the routes of table %d: %w", RouteTable, err)
		}
		for _, rt := range routes {
			if link, err := netlink.LinkByIndex(rt.LinkIndex); err == nil && link.Attrs().Name != except {
				return link.Attrs().Name, nil
			}
		}
	}
	names, err := snatInterfaces(conn)
	if err != nil {
		return "", err
	}
	for _, name := range names {
		if name == except {
			continue
		}
		_, err := netlink.LinkByName(name)
		if err == nil {
			return name, nil
		}
		if !errors.As(err, new(netlink.LinkNotFoundError)) {
			return "", fmt.Errorf("failed to look up %s: %w", name, err)
		}
	}
	return "", nil
}

// snatInterfaces returns the output interfaces that the postrouting chain's rules match: the
// egress interface of the router that installed the table.
func snatInterfaces(conn *nftables.Conn) ([]string, error) {
	found, err := hasTable(conn)
	if err != nil || !found {
		return nil, err
	}
	rules, err := conn.GetRules(table, &nftables.Chain{Name: "postrouting", Table: table})
	if errors.Is(err, unix.ENOENT) {
		return nil, nil // a table without the chain: no interface named
	}
	if err != nil {
		return nil, fmt.Errorf("failed to list the rules of chain postrouting: %w", err)
	}
	var names []string
	for _, rule := range rules {
		for i := 0; i+1 < len(rule.Exprs); i++ {
			meta, ok := rule.Exprs[i].(*expr.Meta)
			cmp, isCmp := rule.Exprs[i+1].(*expr.Cmp)
			if ok && isCmp && meta.Key == expr.MetaKeyOIFNAME {
				names = append(names, string(bytes.TrimRight(cmp.Data, "\x00")))
			}
		}
	}
	return names, nil
}

// countRouting counts, in the current namespace, the rules at RulePriority that look up
// RouteTable and the routes in RouteTable, both families.
func countRouting() (rules, routes int, err error) {
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := netlink.RuleListFiltered(family, &netlink.Rule{Table: RouteTable, Priority: RulePriority},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PRIORITY)
		if err != nil {
			return 0, 0, fmt.Errorf("failed to list rules: %w", err)
		}
		rts, err := netlink.RouteListFiltered(family, &netlink.Route{Table: RouteTable}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return 0, 0, fmt.Errorf("failed to list the routes of table %d: %w", RouteTable, err)
		}
		rules, routes = rules+len(rs), routes+len(rts)
	}
	return rules, routes, nil
}
