package cluster_test

import (
	"net"
	"testing"
	"time"

	"github.com/netpool/netpool/test/poll"
)

// TestPodsRunOnEveryNode: a pod of the test image runs on each node, scheduled there by the
// scheduler and started by that node's kubelet, containerd and runc; its eth0 has the address
// kubelet reports, and a pod on one node reaches a pod on every other over the pod network.
func TestPodsRunOnEveryNode(t *testing.T) {
	c := need(t)
	ns := testNamespace(t, c, nil)
	var ips []string
	for _, n := range c.Nodes {
		p := createRunning(t, c, serverPod(ns, "server-"+n.Name, n.Name, nil))
		if p.Spec.NodeName != n.Name {
			t.Fatalf("pod server-%s ran on %s", n.Name, p.Spec.NodeName)
		}
		var a answer
		poll.Eventually(t, 30*time.Second, "the server on "+n.Name+" answers", func() error {
			var err error
			a, err = ask(p.Status.PodIP, "")
			return err
		})
		if !a.hasAddr("eth0", p.Status.PodIP) {
			t.Fatalf("pod on %s has eth0 %v, kubelet reports %s", n.Name, a.Addrs["eth0"], p.Status.PodIP)
		}
		_, subnet, _ := net.ParseCIDR(n.PodCIDR)
		if !subnet.Contains(net.ParseIP(p.Status.PodIP)) {
			t.Fatalf("pod on %s has %s, outside the node's %s", n.Name, p.Status.PodIP, n.PodCIDR)
		}
		ips = append(ips, p.Status.PodIP)
	}
	for i, from := range ips {
		for j, to := range ips {
			if i == j {
				continue
			}
			a, err := ask(from, net.JoinHostPort(to, "8080"))
			if err != nil {
				t.Fatalf("pod %s asking pod %s: %v", from, to, err)
			}
			if !a.hasAddr("eth0", to) {
				t.Fatalf("pod %s asked %s and got %v", from, to, a.Addrs)
			}
			if host, _, _ := net.SplitHostPort(a.Remote); host != from {
				t.Fatalf("pod %s saw the request from %s, want %s (no NAT between pods)", to, a.Remote, from)
			}
		}
	}
}
