package version

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeBuildStampsGitDescribe checks the version plumbing end to end on the plugin (the one
// binary without Kubernetes dependencies, so the build is quick): make build stamps the version
// git describe gives, --version prints it, and so does the about text the plugin prints when run
// without CNI_COMMAND. The other binaries read the same variable (their main tests check --version).
func TestMakeBuildStampsGitDescribe(t *testing.T) {
	root := moduleRoot(t)
	want := gitDescribe(t, root)
	if got := strings.TrimSpace(run(t, root, "make", "-s", "--no-print-directory", "version")); got != want {
		t.Fatalf("make version = %q, want git describe's %q", got, want)
	}

	dir := t.TempDir()
	run(t, root, "make", "-s", "--no-print-directory", "build", "BINARIES=netpool", "BINDIR="+dir)
	bin := filepath.Join(dir, "netpool")
	if got := strings.TrimSpace(run(t, dir, bin, "--version")); got != "netpool "+want {
		t.Errorf("netpool --version = %q, want %q", got, "netpool "+want)
	}

	about := exec.Command(bin)
	about.Env = []string{} // no CNI_COMMAND
	var stderr bytes.Buffer
	about.Stderr = &stderr
	// skel exits 0 after the about text; a failure here would be a crash.
	if err := about.Run(); err != nil {
		t.Fatalf("netpool without CNI_COMMAND: %v\n%s", err, stderr.Bytes())
	}
	if first, _, _ := strings.Cut(stderr.String(), "\n"); first != "netpool IPAM plugin "+want {
		t.Errorf("about text = %q, want %q", first, "netpool IPAM plugin "+want)
	}
}

// gitDescribe is the version the Makefile documents: git describe's, or "devel" outside a git
// checkout.
func gitDescribe(t *testing.T, root string) string {
	t.Helper()
	cmd := exec.Command("git", "describe", "--tags", "--always", "--dirty")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Logf("git describe: %v; expecting devel", err)
		return "devel"
	}
	return strings.TrimSpace(string(out))
}

// run runs name with args in dir and returns its stdout; a failure stops the test.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return string(out)
}

// moduleRoot finds the checkout's go.mod above the test's working directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}
