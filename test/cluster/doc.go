// Package cluster starts a real Kubernetes cluster on this machine, without Docker, and tears it down
// without a trace: etcd and kube-apiserver (the envtest builds), kube-controller-manager and
// kube-scheduler on the host, and nodes, each a network namespace with a private mount namespace
// that runs its own containerd (with runc), kubelet and kube-proxy (nftables mode), with its own
// cgroup root. The nodes share a "cluster" bridge (pod and Service traffic), a "storage" bridge
// (every node's eth1, the macvlan master of the README's NADs) and an "external" bridge (eth2,
// the destinations of an EgressRouter).
//
// Everything it starts is a process it stops by PID; everything it creates (links, namespaces,
// mounts, cgroups, nftables tables, directories) it removes, and the sysctls kubelet rewrites are
// restored. Leftovers compares the machine before and after. The binaries come from
// hack/cluster-binaries.sh and hack/envtest-binaries.sh; docs/real-cluster.md describes the
// layout, the addresses and the measured figures.
package cluster
