package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/harness"
)

// proc is a process as /proc/<pid>/stat gives it.
type proc struct {
	pid, ppid int
	comm      string
}

// procs lists the running processes.
func procs() map[int]proc {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	out := map[int]proc{}
	for _, stat := range stats {
		b, err := os.ReadFile(stat)
		if err != nil {
			continue // exited meanwhile
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		pid, err1 := strconv.Atoi(filepath.Base(filepath.Dir(stat)))
		ppid, err2 := strconv.Atoi(f[1])
		if err1 == nil && err2 == nil {
			out[pid] = proc{pid, ppid, s[open+1 : end]}
		}
	}
	return out
}

// ipamChildren returns the pids of the processes named comm whose parent is a direct child of
// this test process: the IPAM plugins that main plugins run by libcni are running.
func ipamChildren(comm string) []int {
	self := os.Getpid()
	all := procs()
	var out []int
	for _, p := range all {
		if p.comm == comm && all[p.ppid].ppid == self {
			out = append(out, p.pid)
		}
	}
	return out
}

// twoNodes starts agents for node-a and node-b, each in front of its own host namespace and bridge
// (<bridge>a, <bridge>b), and returns the network of each node, node-a first.
func twoNodes(t *testing.T, env *envtest.Env, network, bridge string, fields map[string]any) []*harness.Network {
	t.Helper()
	var nodes []*harness.Network
	for _, node := range []string{"a", "b"} {
		socket := mustAgent(t, env, "node-"+node)
		nodes = append(nodes, mustNetwork(t, mustNetNS(t), kubeConflist(t, network, bridge+node, socket, fields), nil))
	}
	return nodes
}
