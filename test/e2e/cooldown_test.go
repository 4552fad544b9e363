package e2e

import (
	"net/netip"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/netpool/netpool/test/harness"
)

// TestReuseCooldown runs the reuse cool-down through the real plugin binary, behind bridge, in
// network namespaces, as a runtime does: every call is a new process, so the release time must be
// in the bbolt file. In a window of three addresses, X (the first) is asked for by name, released,
// and then passed over by the next two ADDs, which would have had it straight back without a
// cool-down (a requested address does not move the round-robin cursor); with only X left, the next
// ADD gets it rather than fail.
func TestReuseCooldown(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ctx := testContext(t)

	x := netip.MustParseAddr("10.77.9.10")
	host := mustNetNS(t)
	conf, err := harness.BridgeConflist("e2e-cool", "np-brcool", netpoolIPAM(t, map[string]any{
		"range":         "10.77.9.0/24",
		"range_start":   "10.77.9.10",
		"range_end":     "10.77.9.12",
		"gateway":       "10.77.9.1",
		"reuseCooldown": "1h",
	}))
	network := mustNetwork(t, host, conf, err)

	asked := harness.Attachment("e2e-cool-x", mustNetNS(t), "eth0")
	asked.Args = [][2]string{{"IgnoreUnknown", "1"}, {"IP", x.String()}}
	if got := resultIPs(t, mustAdd(ctx, t, network, asked)); len(got) != 1 || got[0].Addr() != x {
		t.Fatalf("ADD asking for %s got %v", x, got)
	}
	mustDel(ctx, t, network, asked)

	var got []netip.Addr
	var added []*libcni.RuntimeConf
	for _, id := range []string{"e2e-cool-a", "e2e-cool-b", "e2e-cool-c"} {
		nsx := mustNetNS(t)
		rt := harness.Attachment(id, nsx, "eth0")
		ips := resultIPs(t, mustAdd(ctx, t, network, rt))
		if len(ips) != 1 {
			t.Fatalf("ADD %s got %v", id, ips)
		}
		assertKernelAddrs(t, nsx, "eth0", ips)
		got = append(got, ips[0].Addr())
		added = append(added, rt)
	}
	want := []netip.Addr{netip.MustParseAddr("10.77.9.11"), netip.MustParseAddr("10.77.9.12"), x}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ADDs after releasing %s got %v, want %v: the cooling address last, when nothing else is free", x, got, want)
		}
	}
	for _, rt := range added {
		mustDel(ctx, t, network, rt)
	}
}
