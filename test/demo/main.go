// Command demo attaches two network namespaces, "red" and "blue", to a bridge with netpool as their
// IPAM plugin on a bbolt file, shows the addresses the kernel holds inside each namespace, proves
// that they talk over TCP, and walks through CHECK, STATUS, GC and DEL. Everything it creates lives
// in namespaces and a temp dir of its own, removed on the way out, even after a failure.
//
// It needs root. Run it with `make demo` (go run ./test/demo).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/netpool/netpool/test/harness"
)

const (
	networkName = "netpool-demo"
	bridgeName  = "np-demo0"
	ifName      = "eth0"
	// podNamespace is the namespace the demo's CNI_ARGS name its containers' pods in.
	podNamespace = "demo"
)

func main() {
	ctl := flag.String("netpoolctl", "bin/netpoolctl", "the built netpoolctl (make build), run against the demo's bbolt file")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "netpool demo: must run as root (it creates network namespaces and a bridge); try: sudo make demo")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *ctl); err != nil {
		fmt.Fprintf(os.Stderr, "netpool demo: FAILED: %v\n", err)
		stop()
		os.Exit(1)
	}
	fmt.Println("netpool demo: done")
}

// container is one demo namespace and its attachment.
type container struct {
	name string
	ns   ns.NetNS
}

// attachment is the runtime's view of the container's attachment: a container ID, its namespace
// and the CNI_ARGS a Kubernetes runtime passes (the pod's namespace and name), which the store
// records and netpoolctl shows.
func (ct container) attachment() *libcni.RuntimeConf {
	rt := harness.Attachment("demo-"+ct.name, ct.ns, ifName)
	rt.Args = [][2]string{{"IgnoreUnknown", "true"}, {"K8S_POD_NAMESPACE", podNamespace}, {"K8S_POD_NAME", ct.name}}
	return rt
}

func run(ctx context.Context, netpoolctl string) (err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var c cleanups
	defer func() { err = errors.Join(err, c.run()) }()

	// Found before anything is made: without it the demo cannot show its allocations.
	if _, err := os.Stat(netpoolctl); err != nil {
		return fmt.Errorf("netpoolctl: %w (make demo builds it with make build)", err)
	}
	step("Building netpool and the reference plugins (their first build on a machine takes minutes)")
	harness.Progress = details{}
	binDir, err := harness.BinDir()
	if err != nil {
		return err
	}
	c.add("removing "+binDir, harness.RemoveBinDir)
	detail("CNI_PATH=%s", binDir)

	dir, err := os.MkdirTemp("", "netpool-demo-")
	if err != nil {
		return err
	}
	c.add("removing "+dir, func() error { return os.RemoveAll(dir) })
	step("Creating network namespaces")
	host, err := newNetNS(&c, "host")
	if err != nil {
		return err
	}
	red, err := newNetNS(&c, "red")
	if err != nil {
		return err
	}
	blue, err := newNetNS(&c, "blue")
	if err != nil {
		return err
	}
	containers := []container{{"red", red}, {"blue", blue}}

	subnet := netip.MustParsePrefix("10.77.0.0/24")
	db := filepath.Join(dir, "netpool.db")
	conf, err := harness.BridgeConflist(networkName, bridgeName, map[string]any{
		"type":        "netpool",
		"range":       subnet.String(),
		"range_start": "10.77.0.10",
		"gateway":     "10.77.0.1",
		"routes":      []any{map[string]any{"dst": "0.0.0.0/0"}},
		"datastore":   "bbolt",
		"bbolt":       map[string]any{"path": db},
	})
	if err != nil {
		return err
	}
	network, err := harness.NewNetwork(binDir, filepath.Join(dir, "cni-cache"), host, conf)
	if err != nil {
		return err
	}
	step("Network %q: bridge %s (in its own host namespace) with netpool IPAM", networkName, bridgeName)
	pretty, _ := json.MarshalIndent(json.RawMessage(conf), "    ", "  ") // conf came from json.Marshal: cannot fail
	detail("%s", pretty)

	var (
		valid    []types.GCAttachment
		held     = map[string]netip.Addr{} // pod namespace/name -> address, for netpoolctl
		detached bool                      // set once the demo's own DEL step succeeded, so cleanup need not DEL again
	)
	for _, ct := range containers {
		rt := ct.attachment()
		res, err := network.Add(ctx, rt)
		if err != nil {
			return fmt.Errorf("ADD %s: %w", ct.name, err)
		}
		c.add("DEL "+ct.name, func() error {
			if detached {
				return nil
			}
			return network.Del(context.Background(), rt)
		})
		valid = append(valid, types.GCAttachment{ContainerID: rt.ContainerID, IfName: rt.IfName})
		for _, ip := range res.IPs {
			if a, ok := netip.AddrFromSlice(ip.Address.IP); ok {
				held[podNamespace+"/"+ct.name] = a.Unmap()
			}
			step("ADD %-4s -> %s gateway %s", ct.name, ip.Address.String(), ip.Gateway)
		}
	}

	step("Addresses inside the namespaces (read with netlink)")
	var redAddr netip.Addr
	for _, ct := range containers {
		got, err := harness.WaitAddrs(ct.ns, ifName, 10*time.Second)
		if err != nil {
			return err
		}
		if len(got) == 0 {
			return fmt.Errorf("%s %s holds no address", ct.name, ifName)
		}
		detail("%-4s %s: %s", ct.name, ifName, harness.FormatPrefixes(got))
		if ct.ns == red {
			redAddr = got[0].Addr()
		}
	}

	peer, err := harness.DialTCP(ctx, red, redAddr, blue)
	if err != nil {
		return fmt.Errorf("TCP blue -> red: %w", err)
	}
	step("TCP blue -> red %s: connected, red saw the connection come from %s", redAddr, peer)

	check := func(when string) error {
		for _, ct := range containers {
			if err := network.Check(ctx, ct.attachment()); err != nil {
				return fmt.Errorf("CHECK %s %s: %w", ct.name, when, err)
			}
		}
		step("CHECK red, blue%s: ok", when)
		return nil
	}
	if err := check(""); err != nil {
		return err
	}
	if err := network.Status(ctx); err != nil {
		return fmt.Errorf("STATUS: %w", err)
	}
	step("STATUS: ok")

	// bridge does not forward GC to its IPAM plugin yet, so GC goes to netpool directly.
	if err := network.GCIPAM(ctx, valid); err != nil {
		return fmt.Errorf("GC: %w", err)
	}
	step("GC (sent straight to netpool, listing red and blue as valid): ok")
	if err := check(" after GC"); err != nil {
		return err
	}

	step("The allocations, as netpoolctl shows them (the built %s)", netpoolctl)
	if err := showWithNetpoolctl(ctx, netpoolctl, db, subnet, held); err != nil {
		return err
	}

	for _, ct := range containers {
		if err := network.Del(ctx, ct.attachment()); err != nil {
			return fmt.Errorf("DEL %s: %w", ct.name, err)
		}
	}
	detached = true
	step("DEL red, blue: ok")
	return nil
}
