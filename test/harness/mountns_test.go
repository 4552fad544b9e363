package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMountView shows that a bind mount made for a view is seen by the process run in it and by
// nothing outside, through both the command and the wrapper script.
func TestMountView(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: mount namespaces need root (run as root, as CI does)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatalf("unshare(1) is required: %v", err)
	}
	src, target := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "marker"), []byte("it's the view"), 0o644); err != nil {
		t.Fatal(err)
	}
	binds := []Bind{{Source: src, Target: target}}

	out, err := MountViewCommand(binds, "cat", filepath.Join(target, "marker")).CombinedOutput()
	if err != nil || string(out) != "it's the view" {
		t.Fatalf("inside the view: %q, %v; want the marker", out, err)
	}
	if _, err := os.Stat(filepath.Join(target, "marker")); !os.IsNotExist(err) {
		t.Fatalf("outside the view the target shows the marker (err %v): the mount leaked", err)
	}

	wrapper := filepath.Join(t.TempDir(), "cat-in-view")
	if err := WriteMountViewWrapper(wrapper, "/bin/cat", binds); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(wrapper, filepath.Join(target, "marker"), "-")
	cmd.Stdin = strings.NewReader(" and stdin")
	out, err = cmd.CombinedOutput()
	if err != nil || string(out) != "it's the view and stdin" {
		t.Fatalf("wrapper: %q, %v; want the marker and stdin", out, err)
	}
}
