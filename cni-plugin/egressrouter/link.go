package egressrouter

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

var netlinkModes = map[string]netlink.MacvlanMode{
	"bridge":   netlink.MACVLAN_MODE_BRIDGE,
	"private":  netlink.MACVLAN_MODE_PRIVATE,
	"vepa":     netlink.MACVLAN_MODE_VEPA,
	"passthru": netlink.MACVLAN_MODE_PASSTHRU,
}

// resolveMaster finds the macvlan master in the current (host) namespace: the configured one, or
// the interface of the default route.
func resolveMaster(name string) (netlink.Link, error) {
	if name == "" {
		var err error
		if name, err = defaultRouteInterface(); err != nil {
			return nil, err
		}
	}
	link, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("%w: master %q in the host namespace: %w", ErrMasterNotFound, name, err)
	}
	return link, nil
}

// defaultRouteInterface returns the interface of the host's IPv4 default route, else its IPv6 one.
func defaultRouteInterface() (string, error) {
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := netlink.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return "", fmt.Errorf("failed to list the host's routes: %w", err)
		}
		for _, r := range routes {
			if r.Dst != nil {
				if ones, _ := r.Dst.Mask.Size(); ones != 0 {
					continue
				}
			}
			index := r.LinkIndex
			if index == 0 && len(r.MultiPath) > 0 {
				index = r.MultiPath[0].LinkIndex
			}
			if link, err := netlink.LinkByIndex(index); err == nil {
				return link.Attrs().Name, nil
			}
		}
	}
	return "", fmt.Errorf("%w: interface.master is empty and the host namespace has no default route to take it from", ErrMasterNotFound)
}

// createMacvlan makes the egress macvlan on master straight inside netns under a temporary name
// (ifName may exist in the host namespace) and renames it to ifName there.
func createMacvlan(r *Router, master netlink.Link, netns ns.NetNS, ifName string) error {
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return fmt.Errorf("failed to pick a temporary interface name: %w", err)
	}
	tmpName := "npegr" + hex.EncodeToString(suffix[:])
	mtu := r.MTU
	if mtu == 0 {
		mtu = master.Attrs().MTU
	}
	mv := &netlink.Macvlan{
		LinkAttrs: netlink.LinkAttrs{
			Name:        tmpName,
			ParentIndex: master.Attrs().Index,
			MTU:         mtu,
			Namespace:   netlink.NsFd(int(netns.Fd())),
		},
		Mode: netlinkModes[r.MacvlanMode],
	}
	// A passthru macvlan takes over the master's own MAC; a derived one would rewrite the master's.
	if r.MAC != nil && r.MacvlanMode != "passthru" {
		mv.HardwareAddr = r.MAC
	}
	if err := netlink.LinkAdd(mv); err != nil {
		return fmt.Errorf("failed to create macvlan on %s (mode %s, mtu %d): %w", master.Attrs().Name, r.MacvlanMode, mtu, err)
	}
	return netns.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName(tmpName)
		if err != nil {
			return fmt.Errorf("failed to find the new macvlan %s: %w", tmpName, err)
		}
		if err := netlink.LinkSetName(link, ifName); err != nil {
			delErr := netlink.LinkDel(link)
			return errors.Join(fmt.Errorf("failed to rename %s to %s: %w", tmpName, ifName, err), delErr)
		}
		return nil
	})
}
