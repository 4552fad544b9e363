package envtest

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/netpool/netpool/test/poll"
)

// CrashAPIServer kills (SIGKILL) this Env's kube-apiserver, a child of the test process, as a
// crashed API server dies. StopControlPlane alone stops it gracefully, which does not finish within
// envtest's 20 s stop timeout while clients hold watches open (node agents always do); after the
// kill, StopControlPlane only has etcd left to stop.
func (e *Env) CrashAPIServer() error {
	u, err := url.Parse(e.Config.Host)
	if err != nil {
		return err
	}
	port := []byte("--secure-port=" + u.Port())
	self := strconv.Itoa(os.Getpid())
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return err
	}
	for _, stat := range stats {
		b, err := os.ReadFile(stat)
		if err != nil {
			continue // exited meanwhile
		}
		// stat: pid (comm) state ppid ...
		end := bytes.LastIndexByte(b, ')')
		if end < 0 || !bytes.Contains(b[:end], []byte("(kube-apiserver")) {
			continue
		}
		if f := strings.Fields(string(b[end+1:])); len(f) < 2 || f[1] != self {
			continue
		}
		dir := filepath.Dir(stat)
		cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil || !bytes.Contains(cmdline, port) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			return err
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return fmt.Errorf("killing kube-apiserver (pid %d): %w", pid, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return poll.Until(ctx, 10*time.Millisecond, func(context.Context) error {
			if b, err := os.ReadFile(stat); err != nil || bytes.Contains(b, []byte(") Z")) {
				return nil
			}
			return fmt.Errorf("kube-apiserver (pid %d) still running after SIGKILL", pid)
		})
	}
	return fmt.Errorf("no kube-apiserver child of this process serves port %s", u.Port())
}
