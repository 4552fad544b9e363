package main

import (
	"os"
	"syscall"
	"time"

	"github.com/netpool/netpool/test/bench/benchproc"
)

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
	for _, pid := range benchproc.ChildrenNamed(os.Getpid(), "kube-apiserver", "etcd") {
		s.controlPlane += procCPU(pid)
	}
	return s
}

func tv(t syscall.Timeval) time.Duration {
	return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
}

// procCPU is utime+stime of a live process; one that is gone counts zero.
func procCPU(pid int) time.Duration {
	p, _ := benchproc.ReadProc(pid)
	return p.CPU
}
