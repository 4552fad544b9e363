package cluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// binaryEnv names the directory of hack/cluster-binaries.sh's binaries; make test sets it after
// running the script, so that a cold build is not charged to a test's timeout.
const binaryEnv = "NETPOOL_CLUSTER_BIN"

// Binaries returns the directory of the node and controller binaries and the directory of
// kube-apiserver and etcd: $NETPOOL_CLUSTER_BIN and $KUBEBUILDER_ASSETS when set, otherwise what
// hack/cluster-binaries.sh and hack/envtest-binaries.sh print (building them if they are not
// cached: minutes).
func Binaries(root string) (bin, assets string, err error) {
	bin = os.Getenv(binaryEnv)
	if bin == "" {
		if bin, err = script(root, "cluster-binaries.sh"); err != nil {
			return "", "", err
		}
	}
	for _, b := range []string{"kubelet", "kube-proxy", "kube-scheduler", "kube-controller-manager", "containerd", "containerd-shim-runc-v2", "ctr", "runc", "multus", "multus-daemon", "multus-shim", "bridge", "host-local", "loopback", "macvlan"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return "", "", fmt.Errorf("%s (%s) lacks %s: run hack/cluster-binaries.sh: %w", bin, binaryEnv, b, err)
		}
	}
	assets = os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		if assets, err = script(root, "envtest-binaries.sh"); err != nil {
			return "", "", err
		}
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			return "", "", fmt.Errorf("%s (KUBEBUILDER_ASSETS) lacks %s: run hack/envtest-binaries.sh: %w", assets, b, err)
		}
	}
	return bin, assets, nil
}

func script(root, name string) (string, error) {
	cmd := exec.Command("bash", filepath.Join(root, "hack", name))
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/%s: %w\n%s", name, err, stderr.Bytes())
	}
	return strings.TrimSpace(stdout.String()), nil
}

// ModuleRoot finds the checkout from the working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/netpool/netpool\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no netpool go.mod above the working directory")
		}
		dir = parent
	}
}
