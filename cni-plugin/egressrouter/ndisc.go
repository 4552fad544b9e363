package egressrouter

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// announceNA sends an unsolicited neighbour advertisement (RFC 4861 7.2.6) for ip to all nodes, with
// the override flag, the IPv6 counterpart of a gratuitous ARP. The kernel fills in the checksum of
// a raw ICMPv6 socket.
func announceNA(ifindex int, mac net.HardwareAddr, ip netip.Addr) error {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMPV6)
	if err != nil {
		return fmt.Errorf("failed to open an ICMPv6 socket: %w", err)
	}
	defer func() { _ = unix.Close(fd) }() // a send-only socket: closing it cannot lose anything
	if err := errors.Join(
		unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_HOPS, 255),
		unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_IF, ifindex),
		unix.Bind(fd, &unix.SockaddrInet6{Addr: ip.As16()}),
	); err != nil {
		return fmt.Errorf("failed to prepare the neighbour advertisement for %s: %w", ip, err)
	}
	msg := make([]byte, 0, 32)
	msg = append(msg, 136, 0, 0, 0)  // neighbour advertisement, code 0, checksum by the kernel
	msg = append(msg, 0x20, 0, 0, 0) // override
	a := ip.As16()
	msg = append(msg, a[:]...)
	msg = append(msg, 2, 1) // option: target link-layer address, 8 bytes
	msg = append(msg, mac...)
	to := &unix.SockaddrInet6{Addr: netip.MustParseAddr("ff02::1").As16(), ZoneId: uint32(ifindex)}
	if err := unix.Sendto(fd, msg, 0, to); err != nil {
		return fmt.Errorf("failed to send the neighbour advertisement for %s: %w", ip, err)
	}
	return nil
}
