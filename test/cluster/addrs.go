package cluster

import "fmt"

// The cluster's addresses. They are fixed, so two clusters cannot run on one machine at once: Start
// takes a machine-wide lock, and a second Start waits for the first cluster to stop.
const (
	// clusterBridge joins every node's eth0 and the host; the apiserver, etcd, the scheduler and
	// the controller-manager listen on the host's address on it.
	clusterBridge = "npk-cluster"
	// storageBridge joins every node's eth1: the macvlan master of the README's NADs.
	storageBridge = "npk-storage"
	// externalBridge joins every node's eth2 and the host's externalHostAddr: the destinations an
	// EgressRouter redirects to.
	externalBridge = "npk-external"

	hostAddr    = "10.200.0.1"
	clusterCIDR = "10.200.0.0/24"
	// podCIDR is split into one /24 per node: node i (from 1) has 10.244.i.0/24.
	podCIDR     = "10.244.0.0/16"
	serviceCIDR = "10.96.0.0/16"
	// apiServiceIP is the kubernetes Service, the first address of serviceCIDR.
	apiServiceIP = "10.96.0.1"
	apiPort      = 6443

	// ExternalHostAddr is the host's address on the external bridge (a /24), the network
	// EgressRouter destinations live on.
	ExternalHostAddr = "192.168.100.1"
	externalPrefix   = 24

	// lockPath serialises clusters on one machine (the addresses above are fixed).
	lockPath = "/run/netpool-test-cluster.lock"
	// cgroupParent is the cgroup under every v1 hierarchy that holds each node's cgroup root.
	cgroupParent = "netpool-e2e"
)

// nodeName is the Kubernetes name of node i (from 1).
func nodeName(i int) string { return fmt.Sprintf("node-%d", i) }

// nodeAddr is node i's eth0 address on the cluster bridge.
func nodeAddr(i int) string { return fmt.Sprintf("10.200.0.%d", 10+i) }

// nodePodCIDR is the pod subnet of node i.
func nodePodCIDR(i int) string { return fmt.Sprintf("10.244.%d.0/24", i) }

// hostVeth is the host end of node i's veth onto bridge kind k ("c", "s" or "e").
func hostVeth(i int, k string) string { return fmt.Sprintf("npk-n%d-%s", i, k) }
