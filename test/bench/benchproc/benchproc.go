// Package benchproc holds what the benches that start processes share: running a helper command
// for its output, picking a free loopback port, and reading a process's CPU time and memory from
// /proc (procfs.go).
package benchproc

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"strings"
)

// FreeAddr returns a loopback address with a port nothing listens on.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// Output runs cmd and returns its trimmed standard output; a failure carries the command line and
// its standard error.
func Output(cmd *exec.Cmd) (string, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, stderr.Bytes())
	}
	return strings.TrimSpace(string(out)), nil
}
