package benchproc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100 on Linux).
const clockTicks = 100

// Proc is what /proc tells of one process.
type Proc struct {
	CPU time.Duration // utime + stime
	RSS int64         // bytes, VmRSS
	HWM int64         // bytes, VmHWM: the peak resident set
}

// ReadProc reads the CPU time and memory of process pid. A figure /proc does not give (the process
// is gone, or is a kernel thread without memory) stays zero, and the error says which.
func ReadProc(pid int) (Proc, error) {
	var p Proc
	var errs []error
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil {
		errs = append(errs, err)
	} else {
		// The command name, in parentheses, may hold spaces: count the fields after it. utime is
		// field 14 of the line, 12 after the name.
		end := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[end+1:]))
		if end < 0 || len(f) < 13 {
			errs = append(errs, fmt.Errorf("/proc/%d/stat: too few fields", pid))
		} else {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			p.CPU = time.Duration(u+s) * time.Second / clockTicks
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err != nil {
		errs = append(errs, err)
	} else {
		hwm := false
		for line := range strings.SplitSeq(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) != 3 || f[2] != "kB" {
				continue
			}
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "VmRSS:":
				p.RSS = kb << 10
			case "VmHWM:":
				p.HWM, hwm = kb<<10, true
			}
		}
		if !hwm {
			errs = append(errs, fmt.Errorf("no VmHWM in /proc/%d/status", pid))
		}
	}
	return p, errors.Join(errs...)
}

// ChildrenNamed returns the PIDs of parent's children whose command name is one of names, such as
// the kube-apiserver and etcd that envtest started.
func ChildrenNamed(parent int, names ...string) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	ppid := strconv.Itoa(parent)
	var out []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // ended since the glob
		}
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(string(b[end+1:])) // state ppid ...
		if len(f) < 2 || f[1] != ppid {
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

// LoadAvg reads the machine's load averages over 1, 5 and 15 minutes from /proc/loadavg.
func LoadAvg() (one, five, fifteen float64, err error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, 0, 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return 0, 0, 0, fmt.Errorf("/proc/loadavg: %q", b)
	}
	var errs [3]error
	one, errs[0] = strconv.ParseFloat(f[0], 64)
	five, errs[1] = strconv.ParseFloat(f[1], 64)
	fifteen, errs[2] = strconv.ParseFloat(f[2], 64)
	return one, five, fifteen, errors.Join(errs[:]...)
}
