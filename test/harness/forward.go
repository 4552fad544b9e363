package harness

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// Forwarder relays TCP connections made to an address inside a network namespace to the same
// address in the test process's own namespace. A simulated node's host namespace uses it to reach
// the envtest API server, which listens on this machine's loopback: a process in the node (Multus)
// dials the very address in its kubeconfig, so the server's certificate still matches.
type Forwarder struct {
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	open map[net.Conn]struct{}
}

// ForwardTCP listens on addr (host:port) inside n, with n's loopback brought up, and relays every
// connection to addr outside. Close stops it.
func ForwardTCP(n ns.NetNS, addr string) (*Forwarder, error) {
	var ln net.Listener
	err := n.Do(func(ns.NetNS) error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return fmt.Errorf("failed to find lo: %w", err)
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return fmt.Errorf("failed to set lo up: %w", err)
		}
		// The socket belongs to the namespace it is made in, whatever thread later accepts on it.
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to listen on %s in %s: %w", addr, n.Path(), err)
	}
	f := &Forwarder{ln: ln, open: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve(addr)
	return f, nil
}

func (f *Forwarder) serve(addr string) {
	defer f.wg.Done()
	for {
		in, err := f.ln.Accept()
		if err != nil {
			return // closed
		}
		// An unlocked goroutine's thread is in the test process's own namespace.
		out, err := net.Dial("tcp", addr)
		if err != nil {
			_ = in.Close()
			continue
		}
		if !f.track(in, out) {
			return
		}
		f.wg.Add(2)
		go f.pipe(in, out)
		go f.pipe(out, in)
	}
}

// track records a relayed pair so that Close can end it; false when Close has begun.
func (f *Forwarder) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.open == nil {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		f.open[c] = struct{}{}
	}
	return true
}

func (f *Forwarder) pipe(dst, src net.Conn) {
	defer f.wg.Done()
	_, _ = io.Copy(dst, src)
	// One direction ended: end both, as a proxy that holds no half-open state.
	_ = dst.Close()
	_ = src.Close()
}

// Close stops listening, ends every relayed connection and waits for the relays to finish.
func (f *Forwarder) Close() error {
	err := f.ln.Close()
	f.mu.Lock()
	for c := range f.open {
		_ = c.Close()
	}
	f.open = nil
	f.mu.Unlock()
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
