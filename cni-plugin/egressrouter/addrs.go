package egressrouter

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/containernetworking/plugins/pkg/utils/sysctl"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// dadTimeout bounds the wait for IPv6 duplicate address detection, which takes about one second
// (one solicitation, RetransTimer 1 s) on a default kernel.
const dadTimeout = 5 * time.Second

// claimAddresses assigns the router's addresses to link in the current namespace, each only once the
// link shows nobody else holds it: IPv6 by the kernel's duplicate address detection, IPv4 by an ARP
// probe first. IPv6 DAD starts first so that it runs while IPv4 is probed.
func claimAddresses(link netlink.Link, addrs []Address) error {
	name, index, mac := link.Attrs().Name, link.Attrs().Index, link.Attrs().HardwareAddr
	var v6 []netip.Prefix
	for _, a := range addrs {
		if a.Prefix.Addr().Is4() {
			continue
		}
		if err := enableDAD(name); err != nil {
			return err
		}
		if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: ipNet(a.Prefix)}); err != nil {
			return fmt.Errorf("failed to add %s to %s: %w", a.Prefix, name, err)
		}
		v6 = append(v6, a.Prefix)
	}
	for _, a := range addrs {
		if !a.Prefix.Addr().Is4() {
			continue
		}
		holder, err := probeARP(index, mac, a.Prefix.Addr())
		if err != nil {
			return fmt.Errorf("failed to probe for %s on %s: %w", a.Prefix.Addr(), name, err)
		}
		if holder != nil {
			return fmt.Errorf("%w: %s answered an ARP probe for %s on %s", ErrAddressInUse, holder, a.Prefix.Addr(), name)
		}
		if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: ipNet(a.Prefix)}); err != nil {
			return fmt.Errorf("failed to add %s to %s: %w", a.Prefix, name, err)
		}
	}
	for _, p := range v6 {
		if err := waitDAD(link, p.Addr()); err != nil {
			return err
		}
	}
	return nil
}

// enableDAD makes sure the kernel runs duplicate address detection on ifName: IPv6 on, accept_dad
// on, at least one solicitation.
func enableDAD(ifName string) error {
	for key, want := range map[string]string{"disable_ipv6": "0", "accept_dad": "1"} {
		if _, err := sysctl.Sysctl(fmt.Sprintf("net/ipv6/conf/%s/%s", ifName, key), want); err != nil {
			return fmt.Errorf("failed to set net.ipv6.conf.%s.%s=%s: %w", ifName, key, want, err)
		}
	}
	got, err := sysctl.Sysctl(fmt.Sprintf("net/ipv6/conf/%s/dad_transmits", ifName))
	if err != nil {
		return fmt.Errorf("failed to read net.ipv6.conf.%s.dad_transmits: %w", ifName, err)
	}
	if got == "0" {
		if _, err := sysctl.Sysctl(fmt.Sprintf("net/ipv6/conf/%s/dad_transmits", ifName), "1"); err != nil {
			return fmt.Errorf("failed to set net.ipv6.conf.%s.dad_transmits=1: %w", ifName, err)
		}
	}
	return nil
}

// waitDAD waits until ip on link is no longer tentative, and fails when DAD found it in use.
func waitDAD(link netlink.Link, ip netip.Addr) error {
	deadline := time.Now().Add(dadTimeout)
	for {
		flags, found, err := addrFlags(link, ip)
		switch {
		case err != nil:
			return err
		case !found:
			return fmt.Errorf("address %s vanished from %s during duplicate address detection", ip, link.Attrs().Name)
		case flags&unix.IFA_F_DADFAILED != 0:
			return fmt.Errorf("%w: duplicate address detection found %s already on the link of %s",
				ErrAddressInUse, ip, link.Attrs().Name)
		case flags&unix.IFA_F_TENTATIVE == 0:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("address %s on %s still tentative after %s: is the link up, with carrier?", ip, link.Attrs().Name, dadTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func addrFlags(link netlink.Link, ip netip.Addr) (int, bool, error) {
	addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return 0, false, fmt.Errorf("failed to list addresses of %s: %w", link.Attrs().Name, err)
	}
	for _, a := range addrs {
		if got, ok := netip.AddrFromSlice(a.IP); ok && got.Unmap() == ip {
			return a.Flags, true, nil
		}
	}
	return 0, false, nil
}

// announce tells the link the router's addresses moved to this MAC.
func announce(link netlink.Link, addrs []Address) error {
	index, mac := link.Attrs().Index, link.Attrs().HardwareAddr
	for _, a := range addrs {
		var err error
		if a.Prefix.Addr().Is4() {
			err = announceARP(index, mac, a.Prefix.Addr())
		} else {
			err = announceNA(index, mac, a.Prefix.Addr())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
