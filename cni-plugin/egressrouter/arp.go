package egressrouter

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// Probe timing: RFC 5227 asks for 1-2 s between probes, which a pod start cannot afford; three
// probes 100 ms apart and 300 ms of listening after the last catch any host that answers ARP on
// the link, which is what ADD must not collide with.
const (
	arpProbes        = 3
	arpProbeInterval = 100 * time.Millisecond
	arpListenAfter   = 300 * time.Millisecond
)

const arpRequest = 1

var broadcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// arpSocket is a packet socket for ARP on one interface of the current namespace.
type arpSocket struct {
	fd      int
	ifindex int
}

func openARP(ifindex int) (*arpSocket, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ARP)))
	if err != nil {
		return nil, fmt.Errorf("failed to open an ARP socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: ifindex}); err != nil {
		return nil, errors.Join(fmt.Errorf("failed to bind the ARP socket: %w", err), unix.Close(fd))
	}
	return &arpSocket{fd: fd, ifindex: ifindex}, nil
}

func (s *arpSocket) Close() error { return unix.Close(s.fd) }

// send broadcasts an ARP request from sha/spa for tpa.
func (s *arpSocket) send(sha net.HardwareAddr, spa, tpa netip.Addr) error {
	pkt := arpPacket(arpRequest, sha, spa, tpa)
	to := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: s.ifindex, Halen: 6}
	copy(to.Addr[:], broadcastMAC)
	if err := unix.Sendto(s.fd, pkt, 0, to); err != nil {
		return fmt.Errorf("failed to send ARP for %s: %w", tpa, err)
	}
	return nil
}

// arpPacket builds an Ethernet/IPv4 ARP packet (without the link-layer header).
func arpPacket(op uint16, sha net.HardwareAddr, spa, tpa netip.Addr) []byte {
	b := make([]byte, 0, 28)
	b = binary.BigEndian.AppendUint16(b, 1)      // hardware type Ethernet
	b = binary.BigEndian.AppendUint16(b, 0x0800) // protocol IPv4
	b = append(b, 6, 4)
	b = binary.BigEndian.AppendUint16(b, op)
	b = append(b, sha...)
	b = append(b, spa.AsSlice()...)
	b = append(b, make([]byte, 6)...)
	return append(b, tpa.AsSlice()...)
}

// probeARP asks the link who holds ip, as RFC 5227 describes (sender address 0.0.0.0), and returns
// the MAC of a host that answers or that probes for the same address itself.
func probeARP(ifindex int, mac net.HardwareAddr, ip netip.Addr) (net.HardwareAddr, error) {
	s, err := openARP(ifindex)
	if err != nil {
		return nil, err
	}
	defer func() { _ = s.Close() }() // a probe socket: closing it cannot lose anything
	unspecified := netip.IPv4Unspecified()
	deadline := time.Now().Add(arpProbes*arpProbeInterval + arpListenAfter)
	nextProbe, sent := time.Now(), 0
	buf := make([]byte, 1500)
	for {
		now := time.Now()
		if sent < arpProbes && !now.Before(nextProbe) {
			if err := s.send(mac, unspecified, ip); err != nil {
				return nil, err
			}
			sent++
			nextProbe = now.Add(arpProbeInterval)
		}
		if now.After(deadline) {
			return nil, nil
		}
		wait := deadline.Sub(now)
		if sent < arpProbes && nextProbe.Sub(now) < wait {
			wait = nextProbe.Sub(now)
		}
		holder, err := s.receiveConflict(buf, wait, mac, ip)
		if err != nil || holder != nil {
			return holder, err
		}
	}
}

// receiveConflict waits up to wait for an ARP packet that shows another host using ip.
func (s *arpSocket) receiveConflict(buf []byte, wait time.Duration, mac net.HardwareAddr, ip netip.Addr) (net.HardwareAddr, error) {
	ms := int(wait / time.Millisecond)
	if ms < 1 {
		ms = 1
	}
	fds := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, ms)
	if errors.Is(err, unix.EINTR) || n == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to wait for ARP: %w", err)
	}
	m, _, err := unix.Recvfrom(s.fd, buf, unix.MSG_DONTWAIT)
	if err != nil {
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to read ARP: %w", err)
	}
	return conflictingSender(buf[:m], mac, ip), nil
}

// conflictingSender returns the sender MAC of pkt when pkt shows another host holding ip (its
// sender address is ip) or probing for it (sender 0.0.0.0, target ip), and nil otherwise.
func conflictingSender(pkt []byte, mac net.HardwareAddr, ip netip.Addr) net.HardwareAddr {
	if len(pkt) < 28 || binary.BigEndian.Uint16(pkt[0:2]) != 1 || binary.BigEndian.Uint16(pkt[2:4]) != 0x0800 ||
		pkt[4] != 6 || pkt[5] != 4 {
		return nil
	}
	sha := net.HardwareAddr(bytes.Clone(pkt[8:14]))
	if bytes.Equal(sha, mac) {
		return nil
	}
	spa, _ := netip.AddrFromSlice(pkt[14:18])
	tpa, _ := netip.AddrFromSlice(pkt[24:28])
	op := binary.BigEndian.Uint16(pkt[6:8])
	if spa == ip || (op == arpRequest && spa.IsUnspecified() && tpa == ip) {
		return sha
	}
	return nil
}

// announceARP sends gratuitous ARPs for ip, so that neighbours with a stale entry (a replaced router
// pod had another MAC) update it at once.
func announceARP(ifindex int, mac net.HardwareAddr, ip netip.Addr) error {
	s, err := openARP(ifindex)
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }() // a send-only socket: closing it cannot lose anything
	for i := 0; i < 2; i++ {
		if err := s.send(mac, ip, ip); err != nil {
			return err
		}
	}
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
