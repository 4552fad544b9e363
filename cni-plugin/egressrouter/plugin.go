package egressrouter

import (
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
)

// SupportedVersions are the CNI spec versions the plugin speaks (GC and STATUS from 1.1.0).
var SupportedVersions = version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

// Funcs are the verbs for skel.PluginMainFuncs; every error leaves typed, as CNI error JSON.
func Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{
		Add:    func(a *skel.CmdArgs) error { return toCNIError(Add(a)) },
		Del:    func(a *skel.CmdArgs) error { return toCNIError(Del(a)) },
		Check:  func(a *skel.CmdArgs) error { return toCNIError(Check(a)) },
		GC:     func(a *skel.CmdArgs) error { return toCNIError(GC(a)) },
		Status: func(a *skel.CmdArgs) error { return statusError(Status(a)) },
	}
}

// Add attaches the router: the macvlan, its addresses, policy routing and the nftables table,
// then prints a types/100 result. On any failure after the macvlan exists, everything ADD made is
// removed again, so a failed ADD leaves the namespace as it found it.
func Add(args *skel.CmdArgs) error {
	r, err := Parse(args.StdinData)
	if err != nil {
		return err
	}
	if err := validIfName(args.IfName); err != nil {
		return invalid("CNI_IFNAME %q: %v", args.IfName, err)
	}
	netns, err := ns.GetNS(args.Netns)
	if err != nil {
		return fmt.Errorf("failed to open network namespace %q: %w", args.Netns, err)
	}
	defer func() { _ = netns.Close() }() // a read-only handle: closing it cannot lose anything
	master, err := resolveMaster(r.Master)
	if err != nil {
		return err
	}
	if err := refuseNodeConflicts(r, master); err != nil {
		return err
	}
	if err := precheck(netns, r, args.IfName); err != nil {
		return err
	}
	if err := createMacvlan(r, master, netns, args.IfName); err != nil {
		return err
	}
	var mac net.HardwareAddr
	err = netns.Do(func(ns.NetNS) error {
		var err error
		mac, err = configure(r, netns, args.IfName)
		return err
	})
	if err != nil {
		if undo := netns.Do(func(ns.NetNS) error { return teardown(netns, args.IfName) }); undo != nil {
			return errors.Join(err, fmt.Errorf("and failed to undo the partial ADD: %w", undo))
		}
		return err
	}
	return types.PrintResult(result(r, args, mac), r.CNIVersion)
}

// precheck refuses, before anything changes, a namespace that lacks the cluster interface,
// already has an interface named ifName, or already holds an egress router (see routerState).
func precheck(netns ns.NetNS, r *Router, ifName string) error {
	return netns.Do(func(ns.NetNS) error {
		if _, err := netlink.LinkByName(r.ClusterInterface); err != nil {
			return fmt.Errorf("%w: %s in %s: %w", ErrClusterInterfaceNotFound, r.ClusterInterface, netns.Path(), err)
		}
		if _, err := netlink.LinkByName(ifName); err == nil {
			return fmt.Errorf("interface %s already exists in %s", ifName, netns.Path())
		}
		conn, err := nftConn(netns)
		if err != nil {
			return err
		}
		state, err := routerState(conn)
		if err != nil {
			return err
		}
		if state != "" {
			return fmt.Errorf("%w: %s holds %s; a pod has at most one egress router, since its policy routing table and nftables table are the namespace's",
				ErrRouterExists, netns.Path(), state)
		}
		return nil
	})
}

// configure does, inside the pod's namespace, everything after the macvlan exists.
func configure(r *Router, netns ns.NetNS, ifName string) (net.HardwareAddr, error) {
	link, err := netlink.LinkByName(ifName)
	if err != nil {
		return nil, fmt.Errorf("failed to find %s: %w", ifName, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return nil, fmt.Errorf("failed to set %s up: %w", ifName, err)
	}
	if err := claimAddresses(link, r.Addresses); err != nil {
		return nil, err
	}
	if err := installRouting(r, link); err != nil {
		return nil, err
	}
	conn, err := nftConn(netns)
	if err != nil {
		return nil, err
	}
	if err := installTable(conn, r, ifName); err != nil {
		return nil, err
	}
	if err := announce(link, r.Addresses); err != nil {
		return nil, err
	}
	return link.Attrs().HardwareAddr, nil
}

func nftConn(netns ns.NetNS) (*nftables.Conn, error) {
	conn, err := nftables.New(nftables.WithNetNSFd(int(netns.Fd())))
	if err != nil {
		return nil, fmt.Errorf("failed to open nftables in %s: %w", netns.Path(), err)
	}
	return conn, nil
}

func result(r *Router, args *skel.CmdArgs, mac net.HardwareAddr) *current.Result {
	res := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{{Name: args.IfName, Mac: mac.String(), Sandbox: args.Netns}},
	}
	for _, a := range r.Addresses {
		res.IPs = append(res.IPs, &current.IPConfig{
			Interface: current.Int(0), Address: *ipNet(a.Prefix), Gateway: a.Gateway.AsSlice(),
		})
	}
	return res
}

// Del removes the macvlan, the policy rules and routes and the nftables table. It reads nothing of
// the config beyond what skel checks (its version and name): a runtime repeats DEL after a failed
// ADD, maybe with a config ADD refused, and that DEL must still clean up, so it removes whatever the
// plugin can install. A namespace that is already gone holds nothing to remove.
func Del(args *skel.CmdArgs) error {
	if args.Netns == "" {
		return nil
	}
	netns, err := ns.GetNS(args.Netns)
	if err != nil {
		var gone ns.NSPathNotExistErr
		if errors.As(err, &gone) {
			return nil
		}
		return fmt.Errorf("failed to open network namespace %q: %w", args.Netns, err)
	}
	defer func() { _ = netns.Close() }() // a read-only handle: closing it cannot lose anything
	return netns.Do(func(ns.NetNS) error { return teardown(netns, args.IfName) })
}

// teardown removes, in the current namespace, what ADD installs for ifName; a missing piece is not
// an error. The routing and the nftables table are left alone while another attachment's egress
// interface still uses them: that is the DEL a runtime runs after ADD refused a second router.
func teardown(netns ns.NetNS, ifName string) error {
	var errs []error
	if link, err := netlink.LinkByName(ifName); err == nil {
		if link.Type() == "macvlan" {
			if err := netlink.LinkDel(link); err != nil {
				errs = append(errs, fmt.Errorf("failed to delete %s: %w", ifName, err))
			}
		}
	} else if !errors.As(err, new(netlink.LinkNotFoundError)) {
		errs = append(errs, fmt.Errorf("failed to look up %s: %w", ifName, err))
	}
	conn, err := nftConn(netns)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	switch owner, err := routerOwner(conn, ifName); {
	case err != nil:
		errs = append(errs, err)
	case owner == "":
		errs = append(errs, removeRouting(), removeTable(conn))
	}
	return errors.Join(errs...)
}

// GC has nothing to collect: everything the plugin installs lives in the pod's network namespace
// and goes with it. It still refuses a config it could not ADD with.
func GC(args *skel.CmdArgs) error {
	_, err := Parse(args.StdinData)
	return err
}

// Status reports whether ADD could succeed now: the config is valid, the master can be found in the
// host namespace, the router would not take the node's own network, and nftables answers.
func Status(args *skel.CmdArgs) error {
	r, err := Parse(args.StdinData)
	if err != nil {
		return err
	}
	master, err := resolveMaster(r.Master)
	if err != nil {
		return err
	}
	if err := refuseNodeConflicts(r, master); err != nil {
		return err
	}
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables unavailable: %w", err)
	}
	if _, err := conn.ListTablesOfFamily(nftables.TableFamilyINet); err != nil {
		return fmt.Errorf("nftables unavailable: %w", err)
	}
	return nil
}

// statusError maps a STATUS failure onto the spec's codes: a bad config stays code 7, anything
// else means ADD would fail now (50).
func statusError(err error) error {
	if err == nil || errors.Is(err, ErrInvalidConfig) {
		return toCNIError(err)
	}
	return types.NewError(types.ErrPluginNotAvailable, "plugin not available: "+err.Error(), "")
}
