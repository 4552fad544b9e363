package cluster_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/netpool/netpool/test/cluster"
)

var (
	netpoolctlOnce sync.Once
	netpoolctlPath string
	netpoolctlErr  error
)

// mustNetpoolctl builds this checkout's netpoolctl once per test process, into a directory that
// TestMain removes.
func mustNetpoolctl(t *testing.T) string {
	t.Helper()
	netpoolctlOnce.Do(func() {
		root, err := cluster.ModuleRoot()
		if err != nil {
			netpoolctlErr = err
			return
		}
		dir, err := os.MkdirTemp("", "netpool-ctl-")
		if err != nil {
			netpoolctlErr = err
			return
		}
		netpoolctlPath = filepath.Join(dir, "netpoolctl")
		cmd := exec.Command("go", "build", "-o", netpoolctlPath, "./cmd/netpoolctl")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			netpoolctlErr = err
			t.Logf("%s", out)
		}
	})
	if netpoolctlErr != nil {
		t.Fatalf("building netpoolctl: %v", netpoolctlErr)
	}
	return netpoolctlPath
}

// removeNetpoolctl removes what mustNetpoolctl built.
func removeNetpoolctl() {
	if netpoolctlPath != "" {
		_ = os.RemoveAll(filepath.Dir(netpoolctlPath))
	}
}
