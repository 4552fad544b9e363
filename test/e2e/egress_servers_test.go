package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/netpool/netpool/test/poll"
)

// serveTCP answers every connection to addr inside netns with "<name> <local address> <peer address>",
// so a client learns which host and port it reached and what source that host saw. It returns a
// counter of accepted connections.
func serveTCP(t *testing.T, netns ns.NetNS, addr netip.AddrPort, name string) *atomic.Int64 {
	t.Helper()
	var ln net.Listener
	must(t, netns.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", addr.String())
		return err
	}))
	t.Cleanup(func() { _ = ln.Close() }) // closing ends the accept loop; its error says nothing
	accepted := new(atomic.Int64)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer func() { _ = conn.Close() }()
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
					return
				}
				_, _ = fmt.Fprintf(conn, "%s %s %s\n", name, conn.LocalAddr(), peerAddr(conn.RemoteAddr()))
			}()
		}
	}()
	return accepted
}

// serveUDP answers every datagram to addr inside netns like serveTCP.
func serveUDP(t *testing.T, netns ns.NetNS, addr netip.AddrPort, name string) {
	t.Helper()
	var pc net.PacketConn
	must(t, netns.Do(func(ns.NetNS) error {
		var err error
		pc, err = net.ListenPacket("udp", addr.String())
		return err
	}))
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = fmt.Fprintf(pcWriter{pc, from}, "%s %s %s\n", name, pc.LocalAddr(), peerAddr(from))
		}
	}()
}

type pcWriter struct {
	pc net.PacketConn
	to net.Addr
}

func (w pcWriter) Write(b []byte) (int, error) { return w.pc.WriteTo(b, w.to) }

func peerAddr(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// reply is what a test server answered.
type reply struct {
	name  string
	local netip.AddrPort
	peer  netip.Addr
}

func parseReply(line string) (reply, error) {
	f := strings.Fields(line)
	if len(f) != 3 {
		return reply{}, fmt.Errorf("unexpected reply %q", line)
	}
	local, err := netip.ParseAddrPort(f[1])
	if err != nil {
		return reply{}, fmt.Errorf("unexpected reply %q: %w", line, err)
	}
	peer, err := netip.ParseAddr(f[2])
	if err != nil {
		return reply{}, fmt.Errorf("unexpected reply %q: %w", line, err)
	}
	return reply{name: f[0], local: netip.AddrPortFrom(local.Addr().Unmap(), local.Port()), peer: peer}, nil
}

// ask sends one line from inside netns to addr over network (tcp or udp) and returns the reply.
// Each attempt has a 2-second timeout; retry says how long to keep trying (a fresh link may drop the
// first packets); a refused connection is returned at once.
func ask(ctx context.Context, netns ns.NetNS, network string, addr netip.AddrPort, retry time.Duration) (reply, error) {
	var (
		r   reply
		err error
	)
	retrying, cancel := context.WithTimeout(ctx, retry)
	defer cancel()
	_ = poll.Until(retrying, 100*time.Millisecond, func(context.Context) error { // err says why it ended
		if r, err = askOnce(ctx, netns, network, addr); err == nil || isRefused(err) {
			return nil
		}
		return err
	})
	return r, err
}

func askOnce(ctx context.Context, netns ns.NetNS, network string, addr netip.AddrPort) (reply, error) {
	var conn net.Conn
	err := netns.Do(func(ns.NetNS) error {
		d := net.Dialer{Timeout: 2 * time.Second}
		var err error
		conn, err = d.DialContext(ctx, network, addr.String())
		return err
	})
	if err != nil {
		return reply{}, err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(conn, "hello\n"); err != nil {
		return reply{}, err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return reply{}, err
	}
	return parseReply(line)
}

func isRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "connection refused")
}

// assertReaches asserts that network traffic from client to addr is answered by the server name
// at want, and that it saw from as its peer.
func assertReaches(ctx context.Context, t *testing.T, client ns.NetNS, network string, addr netip.AddrPort, name string, want netip.AddrPort, from netip.Addr) {
	t.Helper()
	r, err := ask(ctx, client, network, addr, 10*time.Second)
	if err != nil {
		t.Fatalf("%s to %s: %v", network, addr, err)
	}
	if r.name != name || r.local != want || r.peer != from {
		t.Errorf("%s to %s reached %s at %s from %s; want %s at %s from %s", network, addr, r.name, r.local, r.peer, name, want, from)
	} else {
		t.Logf("%s to %s reached %s at %s, which saw %s", network, addr, r.name, r.local, r.peer)
	}
}

// assertRefused asserts that network traffic from client to addr is refused (TCP reset or ICMP
// port unreachable), promptly and not by a timeout.
func assertRefused(ctx context.Context, t *testing.T, client ns.NetNS, network string, addr netip.AddrPort) {
	t.Helper()
	start := time.Now()
	r, err := askOnce(ctx, client, network, addr)
	switch {
	case err == nil:
		t.Errorf("%s to %s was answered by %s at %s; want it refused", network, addr, r.name, r.local)
	case !isRefused(err):
		t.Errorf("%s to %s: %v after %s; want it refused, not dropped", network, addr, err, time.Since(start).Round(time.Millisecond))
	default:
		t.Logf("%s to %s refused as expected after %s: %v", network, addr, time.Since(start).Round(time.Millisecond), err)
	}
}
