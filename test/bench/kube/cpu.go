package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100 on Linux).
const clockTicks = 100

// cpuSnapshot is the CPU time used so far by each part of the run.
type cpuSnapshot struct {
	plugins      time.Duration // plugin processes (reaped children of the bench)
	agents       time.Duration
	controlPlane time.Duration // kube-apiserver and etcd
	bench        time.Duration // this process: the ceiling's client
}

func (c cpuSnapshot) sub(o cpuSnapshot) cpuSnapshot {
	return cpuSnapshot{c.plugins - o.plugins, c.agents - o.agents, c.controlPlane - o.controlPlane, c.bench - o.bench}
}

func (c cpuSnapshot) total() time.Duration { return c.plugins + c.agents + c.controlPlane + c.bench }

// takeCPU reads the CPU time of the run's processes. Errors only leave a part at zero: the figures
// explain the throughput, they do not decide the result.
func takeCPU(agentPIDs []int) cpuSnapshot {
	var s cpuSnapshot
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) == nil {
		s.plugins = tv(ru.Utime) + tv(ru.Stime)
	}
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.bench = tv(ru.Utime) + tv(ru.Stime)
	}
	for _, pid := range agentPIDs {
		s.agents += procCPU(pid)
	}
	for _, pid := range childrenNamed(os.Getpid(), "kube-apiserver", "etcd") {
		s.controlPlane += procCPU(pid)
	}
	return s
}

func tv(t syscall.Timeval) time.Duration {
	return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
}

// procCPU is utime+stime of a live process.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return 0
	}
	f := strings.Fields(string(b[end+1:])) // state ppid ... utime is field 14 of the line, 12 here
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * time.Second / clockTicks
}

// childrenNamed returns the PIDs of parent's children whose command name is one of names.
func childrenNamed(parent int, names ...string) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(string(b[end+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		comm := string(b[open+1 : end])
		for _, n := range names {
			if comm == n {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
				out = append(out, pid)
			}
		}
	}
	return out
}
