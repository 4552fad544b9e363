package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RestartKubelet stops the node's kubelet (SIGTERM) and starts it again; the pods keep running.
func (n *Node) RestartKubelet() error {
	p, err := n.kubelet.restart(20 * time.Second)
	if err != nil {
		return err
	}
	n.kubelet = p
	return nil
}

// RestartContainerd stops the node's containerd and starts it again; the containers and their
// shims keep running, and containerd finds them again.
func (n *Node) RestartContainerd() error {
	p, err := n.containerd.restart(20 * time.Second)
	if err != nil {
		return err
	}
	n.containerd = p
	return nil
}

// KillContainerProcess SIGKILLs every process of the node's containers whose command name is
// comm (as a container's process dying would) and returns their PIDs.
func (n *Node) KillContainerProcess(comm string) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var killed []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		base := filepath.Join("/proc", e.Name())
		c, _ := os.ReadFile(base + "/comm")
		if strings.TrimSpace(string(c)) != comm {
			continue
		}
		if cg, _ := os.ReadFile(base + "/cgroup"); !strings.Contains(string(cg), "/"+cgroupParent+"/"+n.Name+"/") {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return killed, fmt.Errorf("killing %s (pid %d) on %s: %w", comm, pid, n.Name, err)
		}
		killed = append(killed, pid)
	}
	if len(killed) == 0 {
		return nil, fmt.Errorf("no %s process in the containers of %s", comm, n.Name)
	}
	return killed, nil
}
