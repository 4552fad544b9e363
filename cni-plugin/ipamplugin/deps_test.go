package ipamplugin

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPluginBinaryStaysSlim keeps the per-attachment binary's start-up cheap: Kubernetes work is
// the node agent's, so cmd/netpool must link no client-go, no controller-runtime and no TLS stack
// (measured: a process that loads client-go makes ~50 Creates/s where a warm agent makes ~300/s).
func TestPluginBinaryStaysSlim(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/netpool/netpool/cmd/netpool").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed %d packages: %s", len(deps), out)
	}
	if bad := forbiddenDeps(deps); len(bad) > 0 {
		t.Errorf("cmd/netpool links %s", strings.Join(bad, ", "))
	}
}

func forbiddenDeps(deps []string) []string {
	var bad []string
	for _, d := range deps {
		if strings.HasPrefix(d, "k8s.io/") || strings.HasPrefix(d, "sigs.k8s.io/") || d == "crypto/tls" || strings.HasPrefix(d, "crypto/tls/") {
			bad = append(bad, d)
		}
	}
	return bad
}

func TestForbiddenDeps(t *testing.T) {
	got := forbiddenDeps([]string{"fmt", "crypto/tls", "crypto/x509", "k8s.io/client-go/rest", "sigs.k8s.io/controller-runtime", "github.com/x/k8s.io"})
	if strings.Join(got, " ") != "crypto/tls k8s.io/client-go/rest sigs.k8s.io/controller-runtime" {
		t.Errorf("forbiddenDeps = %v", got)
	}
}
