package controller

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedRoleIsUpToDate regenerates deploy/base/controller-role.yaml from the RBAC markers (with
// hack/generate.sh, into a temporary directory) and compares it with the committed file, so a
// reconciler that needs a new verb cannot ship without it.
func TestGeneratedRoleIsUpToDate(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(root, "hack", "generate.sh"), out)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/generate.sh %s: %v\n%s", out, err, b)
	}
	want, err := os.ReadFile(filepath.Join(out, "deploy", "base", "controller-role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "deploy", "base", "controller-role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("deploy/base/controller-role.yaml is stale; run make generate. The markers give:\n%s", want)
	}
}
