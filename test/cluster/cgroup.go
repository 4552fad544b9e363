package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// cgroupRoot is the v1 cgroup tree mount point. This machine has only v1 hierarchies (a tmpfs of
// them); kubelet 1.35+ accepts that with failCgroupV1: false.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupHierarchies lists the mounted v1 hierarchies (cpu, memory, name=systemd, ...), and with
// unified also the cgroup2 mount beside them, where runc makes a container's cgroup too.
func cgroupHierarchies(unified bool) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		// mount point is field 4; the fs type follows the " - " separator.
		for i, s := range f {
			if s == "-" && i+1 < len(f) && (f[i+1] == "cgroup" || unified && f[i+1] == "cgroup2") && strings.HasPrefix(f[4], cgroupRoot+"/") {
				out = append(out, f[4])
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup v1 hierarchy is mounted under " + cgroupRoot)
	}
	sort.Strings(out)
	return out, nil
}

// makeCgroupRoot creates /<cgroupParent>/<node> in every hierarchy: kubelet's cgroupRoot, which
// must exist. cpuset children start with no CPUs and no memory nodes, so they copy their parent's.
func makeCgroupRoot(node string) error {
	hs, err := cgroupHierarchies(false)
	if err != nil {
		return err
	}
	for _, h := range hs {
		parent := h
		for _, part := range []string{cgroupParent, node} {
			dir := filepath.Join(parent, part)
			if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
				return fmt.Errorf("failed to create cgroup %s: %w", dir, err)
			}
			if filepath.Base(h) == "cpuset" {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					v, err := os.ReadFile(filepath.Join(parent, f))
					if err != nil {
						return err
					}
					if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
						return fmt.Errorf("failed to set %s of %s: %w", f, dir, err)
					}
				}
			}
			parent = dir
		}
	}
	return nil
}

// removeCgroups removes /<cgroupParent> in every hierarchy (the cgroup2 one too), depth first. A cgroup with a process
// left in it cannot be removed: the error names it.
func removeCgroups() error {
	hs, err := cgroupHierarchies(true)
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		top := filepath.Join(h, cgroupParent)
		if _, err := os.Stat(top); os.IsNotExist(err) {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		// Deepest first.
		sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
				procs, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
				errs = append(errs, fmt.Errorf("failed to remove cgroup %s (processes: %q): %w", d, strings.Fields(string(procs)), err))
			}
		}
	}
	return errors.Join(errs...)
}

// leftoverCgroups lists what is left under /<cgroupParent>.
func leftoverCgroups() []string {
	hs, _ := cgroupHierarchies(true)
	var out []string
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, cgroupParent)); err == nil {
			out = append(out, filepath.Join(h, cgroupParent))
		}
	}
	return out
}
