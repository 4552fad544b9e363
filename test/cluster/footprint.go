package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Footprint is what of the machine a cluster may change: the harness's links, mounts, cgroups,
// nftables tables, processes, state directories and the sysctls kubelet rewrites. Start takes one
// before it changes anything; Leftovers compares it with one taken after Stop.
type Footprint struct {
	Links, Mounts, Cgroups, Tables, Processes, Dirs []string
	Sysctls                                         map[string]string
}

// TakeFootprint reads the machine's state now.
func TakeFootprint() (*Footprint, error) {
	f := &Footprint{}
	out, err := run("ip", "-o", "link", "show")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) > 1 {
			name := strings.SplitN(strings.TrimSuffix(fields[1], ":"), "@", 2)[0]
			if strings.HasPrefix(name, "npk-") {
				f.Links = append(f.Links, name)
			}
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, "netpool-cluster-") || strings.Contains(line, cgroupParent) || strings.Contains(line, "npk-") {
			f.Mounts = append(f.Mounts, line)
		}
	}
	f.Cgroups = leftoverCgroups()
	if tables, err := run("nft", "list", "tables"); err == nil {
		for _, t := range strings.Split(strings.TrimSpace(tables), "\n") {
			if t != "" {
				f.Tables = append(f.Tables, t)
			}
		}
	} else {
		return nil, fmt.Errorf("listing nftables tables: %w", err)
	}
	f.Processes = ourProcesses()
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "netpool-cluster-*"))
	f.Dirs = dirs
	if f.Sysctls, err = readSysctls(savedSysctls); err != nil {
		return nil, err
	}
	return f, nil
}

// Leftovers lists what after has that before had not (and every sysctl that differs): an empty
// list means the cluster left nothing behind.
func Leftovers(before, after *Footprint) []string {
	var out []string
	diff := func(kind string, b, a []string) {
		had := map[string]bool{}
		for _, s := range b {
			had[s] = true
		}
		for _, s := range a {
			if !had[s] {
				out = append(out, kind+": "+s)
			}
		}
	}
	diff("link", before.Links, after.Links)
	diff("mount", before.Mounts, after.Mounts)
	diff("cgroup", before.Cgroups, after.Cgroups)
	diff("nftables table", before.Tables, after.Tables)
	diff("process", before.Processes, after.Processes)
	diff("directory", before.Dirs, after.Dirs)
	for k, v := range before.Sysctls {
		if after.Sysctls[k] != v {
			out = append(out, fmt.Sprintf("sysctl %s: %s before, %s after", k, v, after.Sysctls[k]))
		}
	}
	sort.Strings(out)
	return out
}

// Before is the footprint Start took before it changed anything.
func (c *Cluster) Before() *Footprint { return c.before }
