package envtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// modulePath is the root module's path; moduleRoot looks for the go.mod that declares it.
const modulePath = "github.com/netpool/netpool"

var (
	assetsMu   sync.Mutex
	assetsDirs = map[string]string{}
)

// binaryAssets returns the directory that holds kube-apiserver and etcd of the tools module
// hack/<module> ("envtest", the version the tests run, or "envtest-minimum", the oldest
// Kubernetes netpool supports), running hack/envtest-binaries.sh once per module and test
// process: it returns at once when the binaries are cached, and builds them (5-10 minutes) when
// they are not.
func binaryAssets(root, module string) (string, error) {
	assetsMu.Lock()
	defer assetsMu.Unlock()
	if dir, ok := assetsDirs[module]; ok {
		return dir, nil
	}
	dir, err := runBinariesScript(root, module)
	if err != nil {
		return "", err
	}
	assetsDirs[module] = dir
	return dir, nil
}

func runBinariesScript(root, module string) (string, error) {
	script := filepath.Join(root, "hack", "envtest-binaries.sh")
	cmd := exec.Command("bash", script, module)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("failed to run %s %s: %w\n%s", script, module, err, stderr.Bytes())
	}
	dir := strings.TrimSpace(stdout.String())
	if err := checkAssets(dir); err != nil {
		return "", fmt.Errorf("%s printed %q: %w", script, dir, err)
	}
	return dir, nil
}

// checkAssets reports whether dir holds both binaries envtest runs.
func checkAssets(dir string) error {
	if dir == "" {
		return errors.New("no binary directory")
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		info, err := os.Stat(filepath.Join(dir, bin))
		if err != nil {
			return fmt.Errorf("failed to find %s: %w", bin, err)
		}
		if info.Mode()&0o111 == 0 {
			return fmt.Errorf("%s in %s is not executable", bin, dir)
		}
	}
	return nil
}

// moduleRoot finds the checkout: the nearest directory at or above the working directory (a
// test's package directory) whose go.mod declares modulePath.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("failed to get the working directory: %w", err)
	}
	return findModule(dir, modulePath)
}

func findModule(dir, module string) (string, error) {
	for start := dir; ; {
		ok, err := declaresModule(filepath.Join(dir, "go.mod"), module)
		if err != nil {
			return "", err
		}
		if ok {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s at or above %s", module, start)
		}
		dir = parent
	}
}

// declaresModule reports whether the go.mod at path declares module; a missing file is false.
func declaresModule(path, module string) (bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("failed to read %s: %w", path, err)
	}
	for line := range strings.Lines(string(data)) {
		if fields := strings.Fields(line); len(fields) == 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == module, nil
		}
	}
	return false, nil
}
