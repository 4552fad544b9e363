package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/cluster"
	"github.com/netpool/netpool/test/poll"
)

// TestIPAMClaimMigration: a "VM launcher" pod with an IPAMClaim reference on node 1 gets the
// claim's address; a second launcher with the same claim on node 2, while the first runs (a live
// migration's shape), gets the same address; deleting both pods keeps the address, and deleting the
// claim releases it through the controller.
func TestIPAMClaimMigration(t *testing.T) {
	// Most of this test is the controller's GC grace passing; it shares no namespace, range or
	// pool with any other test and changes no node, so it waits beside the other one that does
	// (TestIPAMClaimMigration, TestStatefulSetSticky) once every sequential test has run.
	t.Parallel()
	c := need(t)
	ctx := context.Background()
	cl := kubeClient(t, c)
	crd, err := cluster.DecodeYAML(filepath.Join("..", "..", "deploy", "components", "ipamclaims", "ipamclaims-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, crd); err != nil {
		t.Fatal(err)
	}
	ns := testNamespace(t, c, nil)
	const network = "cluster-vm-net"
	applyNAD(t, c, ns, "vm-net", `{"cniVersion": "1.0.0", "name": "`+network+`", "type": "macvlan", "master": "eth1", "mode": "bridge",
 "allowPersistentIPs": true, "ipam": {"type": "netpool", "datastore": "kubernetes", "range": "10.81.0.0/24"}}`)
	claim := &ipamclaimsv1.IPAMClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-a.anet", Namespace: ns},
		Spec:       ipamclaimsv1.IPAMClaimSpec{Network: network},
	}
	if err := cl.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	nets := map[string]string{"k8s.v1.cni.cncf.io/networks": `[{"name": "vm-net", "namespace": "` + ns + `", "interface": "net1", "ipam-claim-reference": "vm-a.anet"}]`}
	src := createRunning(t, c, serverPod(ns, "virt-launcher-src", c.Nodes[0].Name, nets))
	addr := secondaryAddr(t, src, "net1")
	poll.Eventually(t, time.Minute, "the claim's status names "+addr, func() error {
		var got ipamclaimsv1.IPAMClaim
		if err := cl.Get(ctx, clientKey(ns, claim.Name), &got); err != nil {
			return err
		}
		if !slices.ContainsFunc(got.Status.IPs, func(s string) bool { return s == addr || len(s) > len(addr) && s[:len(addr)+1] == addr+"/" }) {
			return fmt.Errorf("status.ips %v", got.Status.IPs)
		}
		return nil
	})
	dst := createRunning(t, c, serverPod(ns, "virt-launcher-dst", c.Nodes[len(c.Nodes)-1].Name, nets))
	if got := secondaryAddr(t, dst, "net1"); got != addr {
		t.Fatalf("the migration target on %s got %s, the claim holds %s", dst.Spec.NodeName, got, addr)
	}
	// The claim's reservation, by its address (an inline range's network is the NAD's name, but
	// its reservations are found by address here, whatever network they record).
	reserved := func() (bool, error) {
		var list ipamv1.OverlappingRangeIPReservationList
		if err := cl.List(ctx, &list); err != nil {
			return false, err
		}
		return slices.ContainsFunc(list.Items, func(r ipamv1.OverlappingRangeIPReservation) bool { return r.Spec.Address == addr }), nil
	}
	if ok, err := reserved(); err != nil || !ok {
		t.Fatalf("while both pods run, %s reserved: %v (%v)", addr, ok, err)
	}
	deletePod(t, c, ns, src.Name)
	deletePod(t, c, ns, dst.Name)
	if ok, err := reserved(); err != nil || !ok {
		t.Fatalf("after both pods went, %s reserved: %v (%v)", addr, ok, err)
	}
	if err := cl.Delete(ctx, claim); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 2*time.Minute, "the claim's delete releases "+addr, func() error {
		ok, err := reserved()
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("still reserved")
		}
		return nil
	})
}
