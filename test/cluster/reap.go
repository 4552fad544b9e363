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

// ours reports whether process pid belongs to a cluster of this harness: it runs a binary of
// hack/cluster-binaries.sh, names a cluster's state directory, or lives under a node's cgroup root.
func ours(pid string) (bool, string) {
	base := filepath.Join("/proc", pid)
	cmdline, err := os.ReadFile(base + "/cmdline")
	if err != nil {
		return false, ""
	}
	cl := strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
	if exe, _ := os.Readlink(base + "/exe"); strings.Contains(exe, "/.cache/netpool/cluster/") && !strings.Contains(exe, "/.tmp-") {
		return true, cl
	}
	if strings.Contains(cl, "/netpool-cluster-") {
		return true, cl
	}
	if cg, _ := os.ReadFile(base + "/cgroup"); strings.Contains(string(cg), ":/"+cgroupParent+"/") {
		return true, cl
	}
	return false, ""
}

// ourProcesses lists the processes of this harness's clusters, "pid: command line".
func ourProcesses() []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	self := strconv.Itoa(os.Getpid())
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil || e.Name() == self {
			continue
		}
		if ok, cl := ours(e.Name()); ok {
			out = append(out, e.Name()+": "+cl)
		}
	}
	return out
}

// reap removes what a cluster killed before it could stop left behind. Start calls it holding the
// machine's cluster lock, so nothing it finds belongs to a live cluster.
func reap() error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		procs := ourProcesses()
		if len(procs) == 0 {
			break
		}
		for _, p := range procs {
			pid, _ := strconv.Atoi(strings.SplitN(p, ":", 2)[0])
			_ = syscall.Kill(pid, syscall.SIGKILL) // one that is gone already is fine
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of an earlier cluster survive SIGKILL: %v", procs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := removeCgroups(); err != nil {
		return err
	}
	if err := restoreRecorded(); err != nil {
		return err
	}
	if err := removeHostNetwork(); err != nil {
		return err
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "netpool-cluster-*"))
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	return nil
}
