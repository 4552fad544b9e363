package agent

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netpool/netpool/test/envtest"
)

// crashAPIServer kills (SIGKILL) the kube-apiserver of env, a child of this test process, as a
// crashed API server dies. Env.StopControlPlane alone stops it gracefully, which does not finish
// within envtest's 20 s stop timeout while clients hold watches open (the agents always do); after
// the kill, StopControlPlane only has etcd left to stop.
func crashAPIServer(t *testing.T, env *envtest.Env) {
	t.Helper()
	u, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	port := []byte("--secure-port=" + u.Port())
	self := strconv.Itoa(os.Getpid())
	procs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, stat := range procs {
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
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("killing kube-apiserver (pid %d): %v", pid, err)
		}
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if b, err := os.ReadFile(stat); err != nil || bytes.Contains(b, []byte(") Z")) {
				return
			}
		}
		t.Fatalf("kube-apiserver (pid %d) still running after SIGKILL", pid)
	}
	t.Fatalf("no kube-apiserver child of this process serves port %s", u.Port())
}
