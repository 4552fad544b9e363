package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Node is one Kubernetes node: a network namespace and a private mount namespace, held open by a
// holder process, in which its containerd, kubelet and kube-proxy run.
type Node struct {
	// Name is the node's Kubernetes name (node-1, ...); Addr its eth0 address on the cluster bridge;
	// PodCIDR its pod subnet.
	Name, Addr, PodCIDR string
	index               int
	// dir is the node's state: its /var/lib, /var/log, /run, /opt and /etc/cni/net.d, bound over
	// those paths in its mount namespace, and its configuration files.
	dir    string
	holder *proc
	// containerd, kubelet and kube-proxy.
	containerd, kubelet, proxy *proc
	// netNS and mntNS are the namespaces' inode numbers, to find every process left in them.
	netNS, mntNS string
}

// Path is the host path of p (an absolute path as the node's processes see it) for the paths the
// node binds from its state directory (/var/lib, /var/log, /run, /opt, /etc/cni/net.d).
func (n *Node) Path(p string) string {
	for _, b := range nodeBinds {
		if p == b.target || strings.HasPrefix(p, b.target+"/") {
			return filepath.Join(n.dir, b.source, strings.TrimPrefix(p, b.target))
		}
	}
	return ""
}

// ContainerdSocket is the host path of the node's containerd socket.
func (n *Node) ContainerdSocket() string { return n.Path("/run/containerd/containerd.sock") }

// nodeBinds are the directories of a node's own, each bound from <state>/<source> over target in
// its mount namespace: kubelet writes /var/lib/kubelet (device-plugins is hard-coded), libcni
// /var/lib/cni, the CRI /var/run/netns, the shim /run/containerd, and netpool's DaemonSet
// /opt/cni/bin, /etc/cni/net.d, /run/netpool and /var/log/netpool through hostPath volumes.
var nodeBinds = []struct{ source, target string }{
	{"var-lib", "/var/lib"},
	{"var-log", "/var/log"},
	{"run", "/run"},
	{"opt", "/opt"},
	{"cni-net.d", "/etc/cni/net.d"},
}

// holderScript makes the mount namespace: the binds, and an overlay on /etc (whose writes go to
// the node's state) only so that /etc/cni/net.d can exist to be bound over without writing the
// host's /etc. Then it makes the whole tree shared, as on a systemd host: containerd mounts a
// hostPath with HostToContainer propagation (Multus thick's /, /run/netns, /var/lib/kubelet) only
// from a shared or slave mount, and only then do mounts made later (a pod's network namespace
// under /run/netns) reach the container. The peer groups are new, made in this namespace after
// it was made private: nothing propagates to or from the host. Then it says it is ready and
// sleeps, holding both namespaces open.
const holderScript = `S="$1"
mount --make-rprivate /
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$S/etc-upper,workdir=$S/etc-work" /etc
mkdir -p /etc/cni/net.d
mount --bind "$S/var-lib" /var/lib
mount --bind "$S/var-log" /var/log
mount --bind "$S/opt" /opt
mount --bind "$S/cni-net.d" /etc/cni/net.d
mount --bind "$S/run" /run
mount --make-rshared /
echo ready > "$S/holder.ready"
exec sleep infinity
`

// startHolder creates the node's namespaces.
func (n *Node) startHolder(logDir string) error {
	for _, d := range []string{"var-lib", "var-log", "run", "opt/cni/bin", "cni-net.d", "etc-upper", "etc-work"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return err
		}
	}
	p, err := startProc(logDir, n.Name+"-holder", nil,
		"unshare", "--net", "--mount", "--propagation", "private", "--", "/bin/sh", "-ec", holderScript, "holder", n.dir)
	if err != nil {
		return err
	}
	n.holder = p
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(n.dir, "holder.ready")); err == nil {
			break
		}
		if done, err := p.exited(); done {
			return fmt.Errorf("the namespace holder of %s exited: %v: %s", n.Name, err, p.tail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the namespace holder of %s is not ready after 30s: %s", n.Name, p.tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	pid := strconv.Itoa(p.pid())
	if n.netNS, err = os.Readlink("/proc/" + pid + "/ns/net"); err != nil {
		return err
	}
	if n.mntNS, err = os.Readlink("/proc/" + pid + "/ns/mnt"); err != nil {
		return err
	}
	return nil
}

// enter is the argv prefix that runs a command in the node's namespaces; nsenter execs the command,
// so a daemon started through it keeps nsenter's PID.
func (n *Node) enter(argv ...string) []string {
	return append([]string{"nsenter", "--target", strconv.Itoa(n.holder.pid()), "--net", "--mount", "--"}, argv...)
}

// Exec runs argv in the node's namespaces (as a process on the node would) and returns its output.
func (n *Node) Exec(argv ...string) (string, error) {
	return run(n.enter(argv...)...)
}

// setupNetwork gives the node eth0 on the cluster bridge, eth1 on the storage bridge and eth2 on the
// external bridge, its routes, and the forwarding a node needs.
func (n *Node) setupNetwork(all []*Node) error {
	pid := strconv.Itoa(n.holder.pid())
	for _, l := range []struct{ k, inside, bridge string }{
		{"c", "eth0", clusterBridge}, {"s", "eth1", storageBridge}, {"e", "eth2", externalBridge},
	} {
		host := hostVeth(n.index, l.k)
		cmds := [][]string{
			{"ip", "link", "add", host, "type", "veth", "peer", "name", l.inside, "netns", pid},
			{"ip", "link", "set", host, "master", l.bridge},
			{"ip", "link", "set", host, "up"},
		}
		for _, c := range cmds {
			if _, err := run(c...); err != nil {
				return err
			}
		}
	}
	in := [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "add", n.Addr + "/24", "dev", "eth0"},
		{"ip", "link", "set", "eth0", "up"},
		{"ip", "link", "set", "eth1", "up"},
		{"ip", "link", "set", "eth2", "up"},
		{"ip", "route", "add", "default", "via", hostAddr},
		// Pod traffic, bridged inside the node, goes through kube-proxy's rules.
		{"sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward && echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables"},
	}
	for _, o := range all {
		if o != n {
			// Straight to the other node over the bridge, not through the host.
			in = append(in, []string{"ip", "route", "add", o.PodCIDR, "via", o.Addr})
		}
	}
	for _, c := range in {
		if _, err := n.Exec(c...); err != nil {
			return err
		}
	}
	// The host reaches (and answers) the node's pods through the node.
	_, err := run("ip", "route", "add", n.PodCIDR, "via", n.Addr, "dev", clusterBridge)
	return err
}
