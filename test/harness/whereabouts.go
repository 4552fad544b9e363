package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// whereaboutsModule is the whereabouts module whose IPAM plugin (cmd/whereabouts.go) and CRDs
// (doc/crds) the migration tests run against. Its version is pinned in hack/whereabouts/go.mod, a
// tools module of its own: whereabouts needs older Kubernetes libraries than netpool, so its
// dependency graph must not enter the root go.mod.
const whereaboutsModule = "github.com/k8snetworkplumbingwg/whereabouts"

var (
	whereaboutsOnce sync.Once
	whereaboutsPath string
	whereaboutsErr  error
)

// WhereaboutsBinary returns the path of the real whereabouts IPAM plugin, built once per version
// from the Go module proxy into $NETPOOL_CACHE/whereabouts/<version>/whereabouts.
func WhereaboutsBinary() (string, error) {
	whereaboutsOnce.Do(func() { whereaboutsPath, whereaboutsErr = buildWhereabouts() })
	return whereaboutsPath, whereaboutsErr
}

// WhereaboutsCRDDir returns the directory of whereabouts' CRDs (doc/crds of the pinned module),
// from the module cache, downloading the module first if needed.
func WhereaboutsCRDDir() (string, error) {
	mod, err := whereaboutsToolsModule()
	if err != nil {
		return "", err
	}
	cmd := goCmd(mod, "mod", "download", "-json", whereaboutsModule)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", whereaboutsModule, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", whereaboutsModule, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", whereaboutsModule, info.Error)
	}
	return filepath.Join(info.Dir, "doc", "crds"), nil
}

func whereaboutsToolsModule() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "hack", "whereabouts"), nil
}

func buildWhereabouts() (string, error) {
	mod, err := whereaboutsToolsModule()
	if err != nil {
		return "", err
	}
	version, err := requiredVersion(filepath.Join(mod, "go.mod"), whereaboutsModule)
	if err != nil {
		return "", err
	}
	target := filepath.Join(CacheDir(), "whereabouts", version, "whereabouts")
	if _, err := os.Stat(target); err == nil {
		return target, nil
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return "", fmt.Errorf("failed to create the whereabouts cache: %w", err)
	}
	// A temporary name and a rename: a concurrent or interrupted build never leaves a truncated
	// binary under the final name.
	tmp := fmt.Sprintf("%s.tmp%d", target, os.Getpid())
	cmd := goCmd(mod, "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", tmp, whereaboutsModule+"/cmd")
	// GOWORK=off and -mod=readonly: the build uses hack/whereabouts/go.sum as committed and never
	// writes into the clone.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("go build %s/cmd@%s: %w\n%s", whereaboutsModule, version, err, out)
	}
	if err := os.Rename(tmp, target); err != nil {
		return "", fmt.Errorf("failed to install %s: %w", target, err)
	}
	return target, nil
}
