package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/netpool/netpool/test/cluster"
	"github.com/netpool/netpool/test/poll"
)

// storageNAD is the README quick start's NAD (step 4), with its own network name and range per
// test so that tests do not share a pool.
func storageNAD(network, cidr, gateway string) string {
	return `{"cniVersion": "1.0.0", "name": "` + network + `", "type": "macvlan", "master": "eth1", "mode": "bridge",
 "ipam": {"type": "netpool", "datastore": "kubernetes", "range": "` + cidr + `",
          "gateway": "` + gateway + `", "network_name": "` + network + `"}}`
}

// TestMultusThin: kubelet starts pods whose k8s.v1.cni.cncf.io/networks names a netpool NAD
// through the real Multus thin plugin; each gets its address on net1, Multus' network-status says
// the same, the pods on two nodes talk over the macvlan network, and deleting a pod releases its
// address through kubelet's CNI DEL, not the test's.
func TestMultusThin(t *testing.T) {
	c := need(t)
	ns := testNamespace(t, c, nil)
	podsOnStorage(t, c, ns, "storage-thin", "192.168.20.0/22", "192.168.20.1")
}

// podsOnStorage is what each Multus test shows, whichever way Multus runs: pod a on the first node
// and pod b on the second, in ns, both asking for a storageNAD of network on cidr, get an address
// of cidr on net1 each, which Multus' network-status, the pod itself and its one reservation
// agree on; a reaches b over the storage network and b sees a's net1 address as the source;
// deleting a releases its address through kubelet's CNI DEL, not the test's, and leaves b's, and
// the same DEL releases a's eth0 address in host-local's store.
// b is left running.
func podsOnStorage(t *testing.T, c *cluster.Cluster, ns, network, cidr, gateway string) {
	t.Helper()
	if len(c.Nodes) < 2 {
		t.Fatal("needs two nodes")
	}
	ctx := context.Background()
	cl := kubeClient(t, c)
	applyNAD(t, c, ns, "storage", storageNAD(network, cidr, gateway))
	_, subnet, err := net.ParseCIDR(cidr)
	if err != nil {
		t.Fatal(err)
	}
	nets := map[string]string{"k8s.v1.cni.cncf.io/networks": "storage"}
	a := createRunning(t, c, serverPod(ns, "a", c.Nodes[0].Name, nets))
	b := createRunning(t, c, serverPod(ns, "b", c.Nodes[1].Name, nets))
	aAddr, bAddr := secondaryAddr(t, a, "net1"), secondaryAddr(t, b, "net1")
	for _, p := range []struct{ name, ip, addr, node string }{{"a", a.Status.PodIP, aAddr, a.Spec.NodeName}, {"b", b.Status.PodIP, bAddr, b.Spec.NodeName}} {
		if !subnet.Contains(net.ParseIP(p.addr)) {
			t.Fatalf("pod %s: net1 %s outside %s", p.name, p.addr, cidr)
		}
		var ans answer
		poll.Eventually(t, 30*time.Second, "pod "+p.name+" answers", func() error {
			var err error
			ans, err = ask(p.ip, "")
			return err
		})
		if !ans.hasAddr("net1", p.addr) {
			t.Fatalf("pod %s: network-status says net1 %s, the pod has %v", p.name, p.addr, ans.Addrs)
		}
		rs, err := reservationsOf(ctx, cl, ns, p.name)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || rs[0].Spec.Address != p.addr || rs[0].Spec.Node != p.node || rs[0].Spec.IfName != "net1" {
			t.Fatalf("pod %s (%s on %s): reservations %+v", p.name, p.addr, p.node, rs)
		}
	}
	if aAddr == bAddr {
		t.Fatalf("both pods hold %s", aAddr)
	}
	// a asks b over the storage network: the packets cross node-1's eth1, the storage bridge and
	// node-2's eth1.
	ans, err := ask(a.Status.PodIP, net.JoinHostPort(bAddr, "8080"))
	if err != nil {
		t.Fatalf("pod a asking b at %s: %v", bAddr, err)
	}
	if !ans.hasAddr("net1", bAddr) {
		t.Fatalf("asked %s, answered by %v", bAddr, ans.Addrs)
	}
	if host, _, _ := net.SplitHostPort(ans.Remote); host != aAddr {
		t.Fatalf("b saw the request from %s, want a's net1 %s", ans.Remote, aAddr)
	}
	deletePod(t, c, ns, "a")
	waitReleased(t, cl, ns, "a")
	// The same DEL reached eth0's plugins: host-local on a's node holds a's pod address no more.
	held := c.Node(a.Spec.NodeName).Path(filepath.Join("/var/lib/cni/networks", cluster.PodNetwork, a.Status.PodIP))
	poll.Eventually(t, time.Minute, "host-local releasing a's "+a.Status.PodIP, func() error {
		if _, err := os.Stat(held); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s is still there (%v)", held, err)
		}
		return nil
	})
	if rs, err := reservationsOf(ctx, cl, ns, "b"); err != nil || len(rs) != 1 {
		t.Fatalf("b's reservation after a's delete: %v %v", rs, err)
	}
}
