package harness

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// multusModule is the Multus module whose thin plugin (cmd/multus) the tests drive netpool through.
// Its version is pinned in hack/multus/go.mod, a tools module of its own: Multus needs older
// Kubernetes libraries than netpool, so its dependency graph must not enter the root go.mod.
const multusModule = "gopkg.in/k8snetworkplumbingwg/multus-cni.v4"

var (
	multusOnce sync.Once
	multusPath string
	multusErr  error
)

// MultusBinary returns the path of the real Multus thin plugin, built once per version from the
// Go module proxy into $NETPOOL_CACHE/multus/<version>/multus.
func MultusBinary() (string, error) {
	multusOnce.Do(func() { multusPath, multusErr = buildMultus() })
	return multusPath, multusErr
}

// MustMultusBinary is MultusBinary for tests: it stops the test on a build failure, and skips it
// under -short.
func MustMultusBinary(t testing.TB) string {
	t.Helper()
	SkipShort(t, "Multus built")
	p, err := MultusBinary()
	if err != nil {
		t.Fatalf("building multus: %v", err)
	}
	return p
}

func buildMultus() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	mod := filepath.Join(root, "hack", "multus")
	version, err := requiredVersion(filepath.Join(mod, "go.mod"), multusModule)
	if err != nil {
		return "", err
	}
	target := filepath.Join(CacheDir(), "multus", version, "multus")
	if _, err := os.Stat(target); err == nil {
		return target, nil
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return "", fmt.Errorf("failed to create the multus cache: %w", err)
	}
	// A temporary name and a rename: a concurrent or interrupted build never leaves a truncated
	// binary under the final name.
	tmp := fmt.Sprintf("%s.tmp%d", target, os.Getpid())
	cmd := goCmd(mod, "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", tmp, multusModule+"/cmd/multus")
	// GOWORK=off and -mod=readonly: the build uses hack/multus/go.sum as committed and never
	// writes into the clone.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("go build %s/cmd/multus@%s: %w\n%s", multusModule, version, err, out)
	}
	if err := os.Rename(tmp, target); err != nil {
		return "", fmt.Errorf("failed to install %s: %w", target, err)
	}
	return target, nil
}

// requiredVersion reads module's version from a go.mod's require lines, so a cached build needs
// neither the module graph nor the network.
func requiredVersion(gomod, module string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(fields) >= 2 && fields[0] == module && strings.HasPrefix(fields[1], "v") {
			return fields[1], nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s does not require %s", gomod, module)
}
