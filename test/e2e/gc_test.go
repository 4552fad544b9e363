package e2e

import (
	"net/netip"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netpool/netpool/test/harness"
)

// TestGCReleasesLeakedAllocation leaks the only address of a one-address range (an ADD whose
// runtime lost its state and never sends DEL) and shows that netpool's GC keeps it while the
// runtime lists the attachment as valid, and releases it once the valid list is empty, so that a
// new attachment gets the address.
//
// bridge (containernetworking/plugins v1.10) does not forward GC to its IPAM plugin ("FIXME GC"),
// and libcni's own GC would DEL what its cache holds, which is not GC. So the leak is made with a
// second libcni cache that is then forgotten, and GC is sent straight to netpool (Network.GCIPAM).
func TestGCReleasesLeakedAllocation(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ctx := testContext(t)

	only := netip.MustParseAddr("10.77.2.10")
	host := mustNetNS(t)
	conf, err := harness.BridgeConflist("e2e-gc", "np-br2", netpoolIPAM(t, map[string]any{
		"range":       "10.77.2.0/24",
		"range_start": only.String(),
		"range_end":   only.String(),
		"gateway":     "10.77.2.1",
	}))
	network := mustNetwork(t, host, conf, err)
	// lostRuntime shares the plugins and the bbolt file but has its own libcni cache, which stands
	// for a runtime that crashed and forgot its attachments.
	lostRuntime := mustNetwork(t, host, conf, nil)

	nsLeaked, nsNew := mustNetNS(t), mustNetNS(t)
	leaked := harness.Attachment("e2e-gc-leaked", nsLeaked, "eth0")
	fresh := harness.Attachment("e2e-gc-new", nsNew, "eth0")

	ips := resultIPs(t, mustAdd(ctx, t, lostRuntime, leaked))
	if len(ips) != 1 || ips[0] != netip.PrefixFrom(only, 24) {
		t.Fatalf("ADD got %v, want %s/24", ips, only)
	}
	mustAddFail(ctx, t, network, fresh)

	// GC that lists the attachment as valid must keep its allocation.
	valid := []types.GCAttachment{{ContainerID: leaked.ContainerID, IfName: leaked.IfName}}
	if err := network.GCIPAM(ctx, valid); err != nil {
		t.Fatalf("GC with %v valid: %v", valid, err)
	}
	mustCheck(ctx, t, lostRuntime, leaked)
	mustAddFail(ctx, t, network, fresh)

	// GC with nothing valid releases it.
	if err := network.GCIPAM(ctx, nil); err != nil {
		t.Fatalf("GC with no valid attachment: %v", err)
	}
	// bridge runs the IPAM CHECK before its own, so this fails only if netpool no longer holds it.
	if err := lostRuntime.Check(ctx, leaked); err == nil {
		t.Errorf("CHECK of %s succeeded after GC released its address, want an error", leaked.ContainerID)
	} else {
		t.Logf("CHECK after GC failed as expected: %v", err)
	}
	// The container is gone too; its namespace goes, with the interface that held the address.
	if err := removeNetNS(nsLeaked); err != nil {
		t.Fatal(err)
	}

	res := mustAdd(ctx, t, network, fresh)
	got := resultIPs(t, res)
	if len(got) != 1 || got[0] != ips[0] {
		t.Fatalf("ADD after GC got %v, want %s, the address GC released", got, ips[0])
	}
	assertKernelAddrs(t, nsNew, "eth0", got)
	mustCheck(ctx, t, network, fresh)
	mustDel(ctx, t, network, fresh)
}
