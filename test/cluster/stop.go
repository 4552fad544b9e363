package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Stop tears the cluster down in the order that leaves nothing behind: kube-proxy, the
// controller-manager and the scheduler, kubelet, the apiserver and etcd, containerd; then every
// process still in a node's namespaces or cgroups (pods, shims), the holders (with them the
// namespaces, their mounts and veths), the cgroups, the bridges, the sysctls, the state directory.
// It reports every failure and goes on, so that one failure leaves as little as possible.
func (c *Cluster) Stop() error {
	c.start = time.Now()
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	stop := func(p *proc, grace time.Duration) {
		if p != nil {
			t := time.Now()
			add(p.stop(grace))
			c.say("stopped %s in %s", p.name, time.Since(t).Round(10*time.Millisecond))
		}
	}
	for _, n := range c.Nodes {
		stop(n.proxy, 10*time.Second)
	}
	stop(c.controllerManager, 10*time.Second)
	stop(c.scheduler, 10*time.Second)
	for _, n := range c.Nodes {
		stop(n.kubelet, 20*time.Second)
	}
	// The apiserver drains requests for up to a minute on SIGTERM; nothing it holds outlives the
	// cluster, so it gets a short grace.
	stop(c.apiserver, 3*time.Second)
	stop(c.etcd, 10*time.Second)
	for _, n := range c.Nodes {
		stop(n.containerd, 10*time.Second)
		add(n.killRest())
		stop(n.holder, 5*time.Second)
	}
	add(removeCgroups())
	add(removeHostNetwork())
	if c.sysctls != nil {
		if err := restoreSysctls(c.sysctls); err != nil {
			add(err)
		} else {
			add(os.Remove(sysctlRecord))
		}
	}
	if c.dir != "" {
		if keep := os.Getenv("NETPOOL_CLUSTER_LOGS"); keep != "" {
			add(copyLogs(c.logDir, keep))
		}
		add(os.RemoveAll(c.dir))
	}
	if c.lock != nil {
		add(c.lock.Close()) // releases the flock
	}
	return errors.Join(errs...)
}

// killRest kills every process left in the node's namespaces or under its cgroup root: the pods'
// containers and their shims, which outlive containerd.
func (n *Node) killRest() error {
	if n.holder == nil {
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids := n.processes()
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL) // gone already is fine: the next scan says
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of %s survive SIGKILL: %v", n.Name, pids)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processes lists the PIDs, other than the holder, in the node's network or mount namespace or in
// a cgroup under its cgroup root.
func (n *Node) processes() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == n.holder.pid() {
			continue
		}
		base := filepath.Join("/proc", e.Name())
		if l, _ := os.Readlink(base + "/ns/net"); l != "" && l == n.netNS {
			out = append(out, pid)
			continue
		}
		if l, _ := os.Readlink(base + "/ns/mnt"); l != "" && l == n.mntNS {
			out = append(out, pid)
			continue
		}
		if cg, _ := os.ReadFile(base + "/cgroup"); strings.Contains(string(cg), "/"+cgroupParent+"/"+n.Name+"/") {
			out = append(out, pid)
		}
	}
	return out
}

func copyLogs(from, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := copyFile(filepath.Join(from, e.Name()), filepath.Join(to, e.Name()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
