package v1

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsStayLight keeps the API package free of client-go and controller-runtime, so that the
// CNI plugin, whose start-up is the hot path, can use the types without linking either.
func TestImportsStayLight(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps printed nothing")
	}
	for _, d := range deps {
		for _, banned := range []string{"k8s.io/client-go", "sigs.k8s.io/controller-runtime", "k8s.io/api"} {
			if d == banned || strings.HasPrefix(d, banned+"/") {
				t.Errorf("the API package depends on %s", d)
			}
		}
	}
}
