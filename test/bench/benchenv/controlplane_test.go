package benchenv

import (
	"os"
	"strings"
	"testing"

	"github.com/netpool/netpool/test/bench/benchproc"
)

func TestStartWithoutTheEnvtestScriptFails(t *testing.T) {
	p, err := Start(t.TempDir(), Options{})
	if err == nil || !strings.Contains(err.Error(), "failed to get the envtest binaries") {
		t.Fatalf("Start in an empty directory = %v, %v: want the envtest binaries' error", p, err)
	}
}

// TestStartWithAMissingCRDDirectoryLeavesNothingRunning starts a real control plane that fails on
// its CRDs: Start must stop the kube-apiserver and etcd it started.
func TestStartWithAMissingCRDDirectoryLeavesNothingRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(root, Options{CRDDirs: []string{"no/such/crds"}, QPS: 10, Burst: 20})
	if err == nil {
		_ = p.Stop()
		t.Fatal("Start with a missing CRD directory succeeded")
	}
	if !strings.Contains(err.Error(), "no/such/crds") {
		t.Errorf("Start's error %q does not name the missing directory", err)
	}
	if left := benchproc.ChildrenNamed(os.Getpid(), "kube-apiserver", "etcd"); len(left) > 0 {
		t.Errorf("processes %v are still running", left)
	}
}
