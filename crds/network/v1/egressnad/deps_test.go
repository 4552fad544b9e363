package egressnad

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsOnlyTheStandardLibrary keeps the package linkable into the egress-router plugin,
// which links no Kubernetes code: every dependency is the standard library's.
func TestImportsOnlyTheStandardLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) != 1 || deps[0] != "github.com/netpool/netpool/crds/network/v1/egressnad" {
		t.Errorf("the package's non-standard dependencies are %v, want only itself", deps)
	}
}
