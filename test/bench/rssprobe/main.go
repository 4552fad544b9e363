// Command rssprobe runs one program and reports its peak resident set size, for the bench.
//
// A child's ru_maxrss is never below the peak RSS of the address space it was exec'ed from, and Go
// starts children with vfork, from its own address space: a plugin started straight from the
// bench, which holds tens of MiB, would report them as its own. This probe is a small fresh
// process, so the peak it reports for its one child is the child's own, or the probe's small
// floor when that is higher.
//
// Usage: rssprobe PROGRAM [ARG...]. Stdin and the environment pass through to PROGRAM, its stderr
// too; the probe prints one JSON object on stdout: {"maxRSSKiB":N,"stdout":"...","err":"..."}.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// report is what the probe prints.
type report struct {
	MaxRSSKiB int64  `json:"maxRSSKiB"`
	Stdout    string `json:"stdout"`
	Err       string `json:"err,omitempty"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: rssprobe PROGRAM [ARG...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	var stdout bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, &stdout, os.Stderr
	var r report
	if err := cmd.Run(); err != nil {
		r.Err = err.Error()
	}
	r.Stdout = stdout.String()
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.MaxRSSKiB = ru.Maxrss // Linux reports KiB
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
