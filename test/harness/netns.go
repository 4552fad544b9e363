package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netpool/netpool/test/poll"
)

// NewNetNS creates a persistent network namespace, bind-mounted under /var/run/netns so that CNI
// plugins can enter it by path. Release it with CloseNetNS.
func NewNetNS() (ns.NetNS, error) {
	n, err := testutils.NewNS()
	if err != nil {
		return nil, fmt.Errorf("failed to create network namespace: %w", err)
	}
	return n, nil
}

// CloseNetNS closes and unmounts a namespace made by NewNetNS. Once no process is left inside, the
// kernel destroys it together with every interface it still holds (veth ends, bridges, macvlans).
//
// The unmount is lazy (MNT_DETACH): a plain unmount fails with EBUSY while a plugin process that
// copied the mount into its own mount namespace has not exited yet, which made cleanup flaky.
func CloseNetNS(n ns.NetNS) error {
	path := n.Path()
	err := n.Close()
	if strings.HasPrefix(path, "/proc/") {
		return err
	}
	if uerr := unix.Unmount(path, unix.MNT_DETACH); uerr != nil && !errors.Is(uerr, unix.EINVAL) {
		return errors.Join(err, fmt.Errorf("failed to unmount %s: %w", path, uerr))
	}
	if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		return errors.Join(err, fmt.Errorf("failed to remove %s: %w", path, rerr))
	}
	return err
}

// AddVethPair creates the veth pair name <-> peer inside n and sets both ends up.
func AddVethPair(n ns.NetNS, name, peer string) error {
	return n.Do(func(ns.NetNS) error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("failed to add veth pair %s/%s: %w", name, peer, err)
		}
		for _, ifName := range []string{name, peer} {
			link, err := netlink.LinkByName(ifName)
			if err != nil {
				return fmt.Errorf("failed to find %s: %w", ifName, err)
			}
			if err := netlink.LinkSetUp(link); err != nil {
				return fmt.Errorf("failed to set %s up: %w", ifName, err)
			}
		}
		return nil
	})
}

// WaitAddrs reads the global addresses of ifName inside n with netlink, as the kernel holds them,
// and waits up to timeout until none of them is still tentative (IPv6 duplicate address detection),
// so that the caller may bind to them at once. Link-local addresses are left out.
func WaitAddrs(n ns.NetNS, ifName string, timeout time.Duration) ([]netip.Prefix, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var addrs []netip.Prefix
	err := poll.Until(ctx, poll.Interval, func(context.Context) error {
		var tentative bool
		var err error
		addrs, tentative, err = globalAddrs(n, ifName)
		if err == nil && tentative {
			err = fmt.Errorf("addresses %v of %s still tentative", addrs, ifName)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return addrs, nil
}

func globalAddrs(n ns.NetNS, ifName string) ([]netip.Prefix, bool, error) {
	var (
		out       []netip.Prefix
		tentative bool
	)
	err := n.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName(ifName)
		if err != nil {
			return fmt.Errorf("failed to find %s in %s: %w", ifName, n.Path(), err)
		}
		addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
		if err != nil {
			return fmt.Errorf("failed to list addresses of %s: %w", ifName, err)
		}
		for _, a := range addrs {
			if a.IP.IsLinkLocalUnicast() {
				continue
			}
			ip, ok := netip.AddrFromSlice(a.IP)
			if !ok {
				return fmt.Errorf("bad address %v on %s", a.IP, ifName)
			}
			ones, _ := a.Mask.Size()
			out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
			if a.Flags&unix.IFA_F_TENTATIVE != 0 {
				tentative = true
			}
		}
		return nil
	})
	return out, tentative, err
}

// DialTCP proves TCP connectivity from client to server: it listens on serverAddr inside the server
// namespace, dials it from inside the client namespace, exchanges one line each way and returns the
// source address the server saw, so that the caller can check that nothing rewrote it on the way.
// Dialing is retried for up to 15 seconds (or until ctx ends), because a fresh link may drop the first
// packets.
func DialTCP(ctx context.Context, server ns.NetNS, serverAddr netip.Addr, client ns.NetNS) (netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var ln net.Listener
	err := server.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(serverAddr, 0).String())
		return err
	})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("failed to listen on %s: %w", serverAddr, err)
	}
	defer ln.Close()

	type accepted struct {
		peer netip.Addr
		err  error
	}
	done := make(chan accepted, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- accepted{err: err}
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err == nil {
			_, err = fmt.Fprintf(conn, "pong %s", line)
		}
		peer := conn.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
		done <- accepted{peer: peer, err: err}
	}()

	var conn net.Conn
	err = client.Do(func(ns.NetNS) error {
		return poll.Until(ctx, 100*time.Millisecond, func(ctx context.Context) error {
			d := net.Dialer{Timeout: 2 * time.Second}
			var err error
			conn, err = d.DialContext(ctx, "tcp", ln.Addr().String())
			return err
		})
	})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("failed to dial %s: %w", ln.Addr(), err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(conn, "ping\n"); err != nil {
		return netip.Addr{}, fmt.Errorf("failed to write to %s: %w", ln.Addr(), err)
	}
	reply, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return netip.Addr{}, fmt.Errorf("failed to read from %s: %w", ln.Addr(), err)
	}
	if reply != "pong ping\n" {
		return netip.Addr{}, fmt.Errorf("unexpected reply %q from %s", reply, ln.Addr())
	}
	got := <-done
	if got.err != nil {
		return netip.Addr{}, fmt.Errorf("failed to serve on %s: %w", ln.Addr(), got.err)
	}
	return got.peer, nil
}

// FormatPrefixes joins prefixes for printing.
func FormatPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
