package version

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMakeBuildStampsTheVersion checks the version plumbing end to end on the plugin (the one
// binary without Kubernetes dependencies, so the build is quick): make version is
// hack/version.sh's, make build stamps it, --version prints it, and so does the about text the
// plugin prints when run without CNI_COMMAND. The other binaries read the same variable (their
// main tests check --version).
func TestMakeBuildStampsTheVersion(t *testing.T) {
	root := moduleRoot(t)
	want := strings.TrimSpace(run(t, root, "bash", "hack/version.sh"))
	if !versionForm.MatchString(want) {
		t.Fatalf("hack/version.sh = %q, not of the form %s", want, versionForm)
	}
	if got := strings.TrimSpace(run(t, root, "make", "-s", "--no-print-directory", "version")); got != want {
		t.Fatalf("make version = %q, want hack/version.sh's %q", got, want)
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

// versionForm is what hack/version.sh prints: git describe's form, an image tag too (no "+").
var versionForm = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9]+-g[0-9a-f]{7,})?(-dirty)?$`)

// TestVersionScript runs hack/version.sh in a repository of its own: without tags it counts from
// the commit that set VERSION, as git describe counts from a tag, and once that commit is tagged
// the two agree; a tag wins; a change makes it dirty; outside git it is VERSION itself; a VERSION
// that is not a version is refused.
func TestVersionScript(t *testing.T) {
	root := moduleRoot(t)
	script, err := os.ReadFile(filepath.Join(root, "hack", "version.sh"))
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(repo, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("hack/version.sh", string(script))
	write("VERSION", "v0.1.0\n")
	version := func() string {
		t.Helper()
		return strings.TrimSpace(run(t, repo, "bash", "hack/version.sh"))
	}
	if got := version(); got != "v0.1.0" {
		t.Errorf("outside git: %q, want v0.1.0", got)
	}
	git := func(args ...string) string {
		t.Helper()
		base := []string{"-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}
		return strings.TrimSpace(run(t, repo, "git", append(base, args...)...))
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-qm", "first")
	if got := version(); got != "v0.1.0" {
		t.Errorf("at the commit that set VERSION: %q, want v0.1.0", got)
	}
	write("a.txt", "a")
	git("add", "a.txt")
	git("commit", "-qm", "second")
	write("b.txt", "b")
	git("add", "b.txt")
	git("commit", "-qm", "third")
	short := git("rev-parse", "--short", "HEAD")
	untagged := version()
	if want := "v0.1.0-2-g" + short; untagged != want {
		t.Errorf("two commits after VERSION: %q, want %q", untagged, want)
	}
	write("a.txt", "changed")
	if got := version(); got != untagged+"-dirty" {
		t.Errorf("with a change: %q, want %q", got, untagged+"-dirty")
	}
	git("checkout", "-q", "--", "a.txt")
	first := git("rev-list", "--max-parents=0", "HEAD")
	git("tag", "v0.1.0", first)
	if got, describe := version(), git("describe", "--tags", "--dirty"); got != untagged || got != describe {
		t.Errorf("tagged: %q, want the untagged %q and git describe's %q alike", got, untagged, describe)
	}
	git("tag", "-a", "v0.2.0", "-m", "v0.2.0")
	if got := version(); got != "v0.2.0" {
		t.Errorf("at tag v0.2.0: %q", got)
	}

	write("VERSION", "0.1\n")
	cmd := exec.Command("bash", "hack/version.sh")
	cmd.Dir = repo
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `VERSION holds "0.1", not a version`) {
		t.Errorf("a bad VERSION: %v %s", err, out)
	}
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
