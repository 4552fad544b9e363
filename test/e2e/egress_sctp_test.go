package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"

	"github.com/netpool/netpool/test/poll"
)

// assertSCTPTraffic sends SCTP through the router's SCTP rule, where the kernel has SCTP. Without it
// the test is skipped, and says so: a skip is not a pass.
func assertSCTPTraffic(ctx context.Context, t *testing.T, topo *egressTopology, a egressAddrs) {
	t.Helper()
	fd, err := unix.Socket(sockFamily(a.dest), unix.SOCK_STREAM, unix.IPPROTO_SCTP)
	if err != nil {
		t.Skipf("SCTP traffic NOT tested: this kernel has no SCTP (%v); only the SCTP rule's installation was checked", err)
	}
	_ = unix.Close(fd)
	serveSCTP(t, topo.dest, netip.AddrPortFrom(a.dest, 9000), "dest-sctp")
	var r reply
	poll.Eventually(t, 10*time.Second, fmt.Sprintf("SCTP to %s", netip.AddrPortFrom(a.routerCluster, 9000)), func() error {
		var err error
		r, err = askSCTP(topo.client, netip.AddrPortFrom(a.routerCluster, 9000))
		return err
	})
	if r.name != "dest-sctp" || r.local != netip.AddrPortFrom(a.dest, 9000) || r.peer != a.router.Addr() {
		t.Errorf("SCTP reached %s at %s from %s; want dest-sctp at %s from %s", r.name, r.local, r.peer, netip.AddrPortFrom(a.dest, 9000), a.router.Addr())
	}
}

func sockFamily(a netip.Addr) int {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}
	}
	return &unix.SockaddrInet6{Addr: ap.Addr().As16(), Port: int(ap.Port())}
}

func fromSockaddr(sa unix.Sockaddr) netip.AddrPort {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(sa.Port))
	}
	return netip.AddrPort{}
}

// serveSCTP answers SCTP associations (one-to-one style sockets) like serveTCP.
func serveSCTP(t *testing.T, netns ns.NetNS, addr netip.AddrPort, name string) {
	t.Helper()
	var fd int
	must(t, netns.Do(func(ns.NetNS) error {
		var err error
		if fd, err = unix.Socket(sockFamily(addr.Addr()), unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_SCTP); err != nil {
			return err
		}
		return errors.Join(unix.Bind(fd, sockaddr(addr)), unix.Listen(fd, 16))
	}))
	t.Cleanup(func() { _ = unix.Shutdown(fd, unix.SHUT_RDWR); _ = unix.Close(fd) })
	go func() {
		for {
			conn, peer, err := unix.Accept(fd)
			if err != nil {
				return
			}
			buf := make([]byte, 256)
			if _, err := unix.Read(conn, buf); err == nil {
				_, _ = unix.Write(conn, fmt.Appendf(nil, "%s %s %s\n", name, addr, fromSockaddr(peer).Addr()))
			}
			_ = unix.Close(conn)
		}
	}()
}

func askSCTP(netns ns.NetNS, addr netip.AddrPort) (reply, error) {
	var out reply
	err := netns.Do(func(ns.NetNS) error {
		fd, err := unix.Socket(sockFamily(addr.Addr()), unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_SCTP)
		if err != nil {
			return err
		}
		defer func() { _ = unix.Close(fd) }()
		tv := unix.NsecToTimeval((2 * time.Second).Nanoseconds())
		_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
		if err := unix.Connect(fd, sockaddr(addr)); err != nil {
			return err
		}
		if _, err := unix.Write(fd, []byte("hello\n")); err != nil {
			return err
		}
		buf := make([]byte, 256)
		n, err := unix.Read(fd, buf)
		if err != nil {
			return err
		}
		out, err = parseReply(string(buf[:n]))
		return err
	})
	return out, err
}
