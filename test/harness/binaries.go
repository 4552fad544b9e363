// Package harness builds the binaries that process-level, network-namespace and benchmark tests run:
// the netpool plugins (IPAM and egress router) from this checkout, and the reference CNI plugins
// (bridge, macvlan, host-local) from the containernetworking/plugins version pinned in go.mod.
//
// The reference plugins are cached under $NETPOOL_CACHE (default ~/.cache/netpool), keyed by the
// plugins module version, so only the first run on a machine pays for their build. The netpool binary
// is rebuilt once per test process so that a test never runs a stale plugin.
package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// ReferencePlugins are the containernetworking/plugins binaries the tests chain netpool with.
var ReferencePlugins = []string{
	"plugins/main/bridge",
	"plugins/main/macvlan",
	"plugins/ipam/host-local",
}

const pluginsModule = "github.com/containernetworking/plugins"

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// CacheDir is where fetched or built third-party artefacts live, outside the clone.
func CacheDir() string {
	if d := os.Getenv("NETPOOL_CACHE"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "netpool")
}

// BinDir returns one directory that holds the netpool plugin and the reference plugins, suitable as a
// CNI_PATH. It builds what is missing on first call; later calls in the same process are free.
func BinDir() (string, error) {
	buildOnce.Do(func() { binDir, buildErr = build() })
	return binDir, buildErr
}

// MustBinDir is BinDir for tests: it stops the test on a build failure, and skips it under -short.
func MustBinDir(t testing.TB) string {
	t.Helper()
	SkipShort(t, "the netpool plugins and the reference CNI plugins built")
	d, err := BinDir()
	if err != nil {
		t.Fatalf("building test binaries: %v", err)
	}
	return d
}

func build() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	ref, err := referencePluginDir(root)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "netpool-bin-")
	if err != nil {
		return "", fmt.Errorf("failed to create binary dir: %w", err)
	}
	if err := fill(root, ref, dir); err != nil {
		_ = os.RemoveAll(dir) // the build error is the one worth reporting
		return "", err
	}
	return dir, nil
}

// fill builds this checkout's binaries into dir and links the cached reference plugins beside them.
func fill(root, ref, dir string) error {
	for _, name := range []string{"netpool", "netpool-egress-router"} {
		if err := goBuild(root, filepath.Join(dir, name), "./cmd/"+name); err != nil {
			return err
		}
	}
	for _, p := range ReferencePlugins {
		name := filepath.Base(p)
		if err := os.Symlink(filepath.Join(ref, name), filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("failed to link %s: %w", name, err)
		}
	}
	return nil
}

// referencePluginDir builds the reference plugins once per plugins-module version.
func referencePluginDir(root string) (string, error) {
	out, err := goCmd(root, "list", "-m", "-f", "{{.Version}}", pluginsModule).Output()
	if err != nil {
		return "", fmt.Errorf("failed to read %s version: %w", pluginsModule, err)
	}
	version := strings.TrimSpace(string(out))
	dir := filepath.Join(CacheDir(), "cni-plugins", version)
	for _, p := range ReferencePlugins {
		target := filepath.Join(dir, filepath.Base(p))
		if _, err := os.Stat(target); err == nil {
			continue
		}
		// Build to a temporary name and rename, so that a concurrent or interrupted build never
		// leaves a truncated binary behind under the final name.
		tmp := fmt.Sprintf("%s.tmp%d", target, os.Getpid())
		if err := goBuild(root, tmp, pluginsModule+"/"+p); err != nil {
			return "", err
		}
		if err := os.Rename(tmp, target); err != nil {
			return "", fmt.Errorf("failed to install %s: %w", target, err)
		}
	}
	return dir, nil
}

func goBuild(root, out, pkg string) error {
	cmd := goCmd(root, "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

func goCmd(root string, args ...string) *exec.Cmd {
	goBin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	cmd := exec.Command(goBin, args...)
	cmd.Dir = root
	return cmd
}

// moduleRoot finds the checkout's go.mod from the test's working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

var (
	commandsMu sync.Mutex
	commands   = map[string]string{}
)

// CommandBinary builds this checkout's ./cmd/<name> (netpool-agent, netpoolctl, ...) once per process,
// into BinDir's directory, and returns the binary's path: tests that run a command as an operator
// or a DaemonSet would run the binary, not the package.
func CommandBinary(name string) (string, error) {
	dir, err := BinDir()
	if err != nil {
		return "", err
	}
	commandsMu.Lock()
	defer commandsMu.Unlock()
	if p, ok := commands[name]; ok {
		return p, nil
	}
	if name == "" || strings.ContainsAny(name, `/\.`) {
		return "", fmt.Errorf("command name %q: want the name of a directory under cmd/", name)
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	if err := goBuild(root, p, "./cmd/"+name); err != nil {
		return "", err
	}
	commands[name] = p
	return p, nil
}

// MustCommandBinary is CommandBinary for tests: it stops the test on a build failure, and skips it
// under -short.
func MustCommandBinary(t testing.TB, name string) string {
	t.Helper()
	SkipShort(t, "cmd/"+name+" built")
	p, err := CommandBinary(name)
	if err != nil {
		t.Fatalf("building %s: %v", name, err)
	}
	return p
}
