package e2e

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/netpool/netpool/test/harness"
)

// requireRoot skips the test unless it runs as root, which network namespaces, bridges and veths need.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: network-namespace e2e tests need root (run as root, as CI does)")
	}
}

// testContext bounds a whole test, so that a hung plugin fails it instead of the test binary.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// mustNetNS creates a network namespace that is destroyed, with everything left in it, when the
// test ends.
func mustNetNS(t *testing.T) ns.NetNS {
	t.Helper()
	n, err := harness.NewNetNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := removeNetNS(n); err != nil {
			t.Errorf("failed to remove network namespace: %v", err)
		}
	})
	return n
}

// removed holds, by path, the one removal of each namespace, so that a test may remove a namespace
// early and its cleanup then does nothing.
var removed sync.Map

// removeNetNS removes a namespace made by mustNetNS, once.
func removeNetNS(n ns.NetNS) error {
	remove, _ := removed.LoadOrStore(n.Path(), sync.OnceValue(func() error { return harness.CloseNetNS(n) }))
	return remove.(func() error)()
}

// netpoolIPAM returns a netpool IPAM section on a fresh bbolt file in the test's temp dir, with
// fields (range, ipRanges, gateway, ...) added.
func netpoolIPAM(t *testing.T, fields map[string]any) map[string]any {
	t.Helper()
	ipam := map[string]any{
		"type":      "netpool",
		"datastore": "bbolt",
		"bbolt":     map[string]any{"path": filepath.Join(t.TempDir(), "netpool.db")},
	}
	for k, v := range fields {
		ipam[k] = v
	}
	return ipam
}

// mustNetwork prepares conflist to run from the harness's binary dir, inside host, with a libcni
// cache of its own.
func mustNetwork(t *testing.T, host ns.NetNS, conflist []byte, err error) *harness.Network {
	t.Helper()
	if err != nil {
		t.Fatalf("failed to build conflist: %v", err)
	}
	n, err := harness.NewNetwork(harness.MustBinDir(t), t.TempDir(), host, conflist)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustAdd(ctx context.Context, t *testing.T, n *harness.Network, rt *libcni.RuntimeConf) *current.Result {
	t.Helper()
	res, err := n.Add(ctx, rt)
	if err != nil {
		t.Fatalf("ADD %s/%s: %v", rt.ContainerID, rt.IfName, err)
	}
	return res
}

func mustCheck(ctx context.Context, t *testing.T, n *harness.Network, rt *libcni.RuntimeConf) {
	t.Helper()
	if err := n.Check(ctx, rt); err != nil {
		t.Fatalf("CHECK %s/%s: %v", rt.ContainerID, rt.IfName, err)
	}
}

func mustDel(ctx context.Context, t *testing.T, n *harness.Network, rt *libcni.RuntimeConf) {
	t.Helper()
	if err := n.Del(ctx, rt); err != nil {
		t.Fatalf("DEL %s/%s: %v", rt.ContainerID, rt.IfName, err)
	}
}

// mustAddFail asserts that ADD fails (the range is full) and then DELs the attachment, as a
// runtime does after a failed ADD; that DEL, of something never allocated, must succeed.
func mustAddFail(ctx context.Context, t *testing.T, n *harness.Network, rt *libcni.RuntimeConf) {
	t.Helper()
	if res, err := n.Add(ctx, rt); err == nil {
		t.Fatalf("ADD %s/%s succeeded with %v, want an error: the range is full", rt.ContainerID, rt.IfName, res.IPs)
	} else {
		t.Logf("ADD %s/%s failed as expected: %v", rt.ContainerID, rt.IfName, err)
	}
	mustDel(ctx, t, n, rt)
}

// assertStatus asserts that STATUS succeeds (code 0) or fails with the CNI error code.
func assertStatus(ctx context.Context, t *testing.T, n *harness.Network, code uint) {
	t.Helper()
	err := n.Status(ctx)
	var cniErr *types.Error
	switch {
	case code == 0 && err != nil:
		t.Errorf("STATUS: %v, want ready", err)
	case code == 0:
	case !errors.As(err, &cniErr):
		t.Errorf("STATUS: %v, want CNI error code %d", err, code)
	case cniErr.Code != code:
		t.Errorf("STATUS: code %d (%v), want code %d", cniErr.Code, err, code)
	default:
		t.Logf("STATUS failed as expected: %v", err)
	}
}

// resultIPs returns the result's addresses, in order, with their prefix lengths.
func resultIPs(t *testing.T, res *current.Result) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, ipc := range res.IPs {
		ip, ok := netip.AddrFromSlice(ipc.Address.IP)
		if !ok {
			t.Fatalf("bad address %v in result", ipc.Address)
		}
		ones, _ := ipc.Address.Mask.Size()
		out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
	}
	return out
}

// assertAddr asserts that p is an address between first and last (inclusive) at prefix length bits.
func assertAddr(t *testing.T, p netip.Prefix, first, last netip.Addr, bits int) {
	t.Helper()
	if p.Bits() != bits || p.Addr().Compare(first) < 0 || p.Addr().Compare(last) > 0 {
		t.Errorf("address %s: want one of %s-%s at /%d", p, first, last, bits)
	}
}

// assertGateway asserts that the result's address of gw's family names gw as its gateway.
func assertGateway(t *testing.T, res *current.Result, gw netip.Addr) {
	t.Helper()
	for _, ipc := range res.IPs {
		if (ipc.Address.IP.To4() != nil) != gw.Is4() {
			continue
		}
		if got, _ := netip.AddrFromSlice(ipc.Gateway); got.Unmap() != gw {
			t.Errorf("gateway of %s = %v, want %s", ipc.Address.String(), ipc.Gateway, gw)
		}
	}
}

// assertKernelAddrs asserts that ifName inside netns holds exactly the addresses of the result, as
// the kernel reports them.
func assertKernelAddrs(t *testing.T, netns ns.NetNS, ifName string, want []netip.Prefix) {
	t.Helper()
	got, err := harness.WaitAddrs(netns, ifName, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !samePrefixes(got, want) {
		t.Errorf("%s in %s holds %v, want the result's %v", ifName, netns.Path(), got, want)
	}
}

func samePrefixes(a, b []netip.Prefix) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[netip.Prefix]int{}
	for _, p := range a {
		seen[p]++
	}
	for _, p := range b {
		seen[p]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// assertTCP dials from client to server's address and asserts that the server saw clientAddr.
func assertTCP(ctx context.Context, t *testing.T, server ns.NetNS, serverAddr netip.Addr, client ns.NetNS, clientAddr netip.Addr) {
	t.Helper()
	peer, err := harness.DialTCP(ctx, server, serverAddr, client)
	if err != nil {
		t.Fatalf("TCP %s -> %s: %v", clientAddr, serverAddr, err)
	}
	if peer != clientAddr {
		t.Errorf("TCP to %s came from %s, want %s", serverAddr, peer, clientAddr)
	}
}
