package envtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ipamClaimsModule ships the IPAMClaim CRD (k8s.cni.cncf.io/v1alpha1) under artifacts/; KubeVirt
// clusters install it from there. It is a dependency of netpool (the agent and the controller read
// claims), so the module cache holds it whenever the tests build.
const (
	ipamClaimsModule  = "github.com/k8snetworkplumbingwg/ipamclaims"
	ipamClaimsCRDFile = "artifacts/k8s.cni.cncf.io_ipamclaims.yaml"
)

// InstallIPAMClaimCRD installs the IPAMClaim CRD of the pinned ipamclaims module and waits until
// it is established, for tests of allowPersistentIPs.
func (e *Env) InstallIPAMClaimCRD(tb testing.TB) {
	tb.Helper()
	path := IPAMClaimCRDFile(tb)
	if err := installCRDFile(e.Client, path); err != nil {
		tb.Fatalf("installing the IPAMClaim CRD: %v", fmt.Errorf("%s: %w", ipamClaimsCRDFile, err))
	}
}

// IPAMClaimCRDFile is the path of the IPAMClaim CRD in the pinned ipamclaims module, in the module
// cache.
func IPAMClaimCRDFile(tb testing.TB) string {
	tb.Helper()
	root, err := moduleRoot()
	if err != nil {
		tb.Fatalf("finding the checkout: %v", err)
	}
	// go test runs the test binary with GOROOT set; otherwise go is on PATH.
	goBin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "list", "-m", "-f", "{{.Dir}}", ipamClaimsModule)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("finding module %s: %v", ipamClaimsModule, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		tb.Fatalf("module %s is not in the module cache (go mod download %s)", ipamClaimsModule, ipamClaimsModule)
	}
	return filepath.Join(dir, ipamClaimsCRDFile)
}
