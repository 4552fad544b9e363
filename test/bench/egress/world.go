package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netpool/netpool/test/harness"
)

// path is one way from the client to the destination's server.
type path struct {
	name   string
	client ns.NetNS
	server ns.NetNS
	listen netip.AddrPort // where the server listens
	dial   netip.AddrPort // where the client connects
}

// world is the bench's namespaces: node (holds the macvlan master m0), ext (the external bridge),
// router (cluster side eth0, egress net1), client (c0 to the router, d0 straight onto the bridge),
// and dest (the destination on the bridge).
type world struct {
	node, ext, router, client, dest ns.NetNS
	network                         *harness.Network
	cacheDir                        string
	direct, routed                  path
}

var (
	routerAddr  = netip.MustParsePrefix("192.0.2.99/24")
	gateway     = netip.MustParseAddr("192.0.2.1")
	destAddr    = netip.MustParseAddr("192.0.2.10")
	clientExt   = netip.MustParsePrefix("192.0.2.50/24")
	clientAddr  = netip.MustParsePrefix("10.250.0.1/24")
	routerClust = netip.MustParsePrefix("10.250.0.2/24")
)

func newWorld(ctx context.Context) (*world, error) {
	w := &world{}
	for _, p := range []*ns.NetNS{&w.node, &w.ext, &w.router, &w.client, &w.dest} {
		n, err := harness.NewNetNS()
		if err != nil {
			w.close()
			return nil, err
		}
		*p = n
	}
	if err := w.build(ctx); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *world) build(ctx context.Context) error {
	if err := w.ext.Do(func(ns.NetNS) error {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
		return errors.Join(netlink.LinkAdd(br), netlink.LinkSetUp(br))
	}); err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	for _, s := range []struct {
		a        ns.NetNS
		name     string
		b        ns.NetNS
		peer     string
		addr     netip.Prefix
		peerAddr netip.Prefix
	}{
		{w.node, "m0", w.ext, "pm0", netip.Prefix{}, netip.Prefix{}},
		{w.dest, "eth0", w.ext, "pdest", netip.PrefixFrom(destAddr, 24), netip.Prefix{}},
		{w.client, "d0", w.ext, "pd0", clientExt, netip.Prefix{}},
		{w.router, "eth0", w.client, "c0", routerClust, clientAddr},
	} {
		if err := veth(s.a, s.name, s.b, s.peer); err != nil {
			return err
		}
		if s.b == w.ext {
			if err := enslave(w.ext, s.peer); err != nil {
				return err
			}
		}
		if err := addAddr(s.a, s.name, s.addr); err != nil {
			return err
		}
		if err := addAddr(s.b, s.peer, s.peerAddr); err != nil {
			return err
		}
	}
	if err := defaultRoute(w.router, "eth0", clientAddr.Addr()); err != nil {
		return err
	}
	conf, err := json.Marshal(map[string]any{
		"cniVersion": "1.1.0", "name": "egress-bench",
		"plugins": []any{map[string]any{
			"type":      "netpool-egress-router",
			"interface": map[string]any{"master": "m0", "mode": "bridge"},
			"addresses": []any{map[string]any{"ip": routerAddr.String(), "gateway": gateway.String()}},
			"redirect": map[string]any{"rules": []any{
				map[string]any{"destinationIP": destAddr.String(), "port": 8080, "protocol": "TCP", "targetPort": 5001},
			}},
			"macSeed": "bench/egress",
		}},
	})
	if err != nil {
		return err
	}
	bin, err := harness.BinDir()
	if err != nil {
		return err
	}
	if w.cacheDir, err = os.MkdirTemp("", "egress-bench-cache-"); err != nil {
		return err
	}
	if w.network, err = harness.NewNetwork(bin, w.cacheDir, w.node, conf); err != nil {
		return err
	}
	if _, err := w.network.Add(ctx, harness.Attachment("egress-bench", w.router, "net1")); err != nil {
		return fmt.Errorf("ADD: %w", err)
	}
	listen := netip.AddrPortFrom(destAddr, 5001)
	w.direct = path{name: "direct", client: w.client, server: w.dest, listen: listen, dial: listen}
	w.routed = path{name: "router", client: w.client, server: w.dest, listen: listen,
		dial: netip.AddrPortFrom(routerClust.Addr(), 8080)}
	return nil
}

func (w *world) close() {
	if w.network != nil {
		if err := w.network.Del(context.Background(), harness.Attachment("egress-bench", w.router, "net1")); err != nil {
			fmt.Fprintln(os.Stderr, "egress bench: DEL:", err)
		}
	}
	for _, n := range []ns.NetNS{w.client, w.router, w.dest, w.ext, w.node} {
		if n != nil {
			if err := harness.CloseNetNS(n); err != nil {
				fmt.Fprintln(os.Stderr, "egress bench:", err)
			}
		}
	}
	if w.cacheDir != "" {
		_ = os.RemoveAll(w.cacheDir) // libcni's cache in a temporary directory
	}
}

func veth(a ns.NetNS, name string, b ns.NetNS, peer string) error {
	err := a.Do(func(ns.NetNS) error {
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer, PeerNamespace: netlink.NsFd(int(b.Fd()))}
		if err := netlink.LinkAdd(v); err != nil {
			return err
		}
		return up(name)
	})
	if err == nil {
		err = b.Do(func(ns.NetNS) error { return up(peer) })
	}
	if err != nil {
		return fmt.Errorf("veth %s/%s: %w", name, peer, err)
	}
	return nil
}

func up(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(l)
}

func enslave(ext ns.NetNS, port string) error {
	return ext.Do(func(ns.NetNS) error {
		br, err := netlink.LinkByName("br0")
		if err != nil {
			return err
		}
		l, err := netlink.LinkByName(port)
		if err != nil {
			return err
		}
		return netlink.LinkSetMaster(l, br)
	})
}

func addAddr(n ns.NetNS, ifName string, p netip.Prefix) error {
	if !p.IsValid() {
		return nil
	}
	return n.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName(ifName)
		if err != nil {
			return err
		}
		ipn := &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
		return netlink.AddrAdd(l, &netlink.Addr{IPNet: ipn, Flags: unix.IFA_F_NODAD})
	})
}

func defaultRoute(n ns.NetNS, ifName string, gw netip.Addr) error {
	return n.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName(ifName)
		if err != nil {
			return err
		}
		dst := &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Gw: gw.AsSlice()})
	})
}
