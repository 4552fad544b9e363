package harness

import (
	"errors"
	"fmt"
	"os"
)

// errBinDirRemoved is what BinDir returns once RemoveBinDir has run.
var errBinDirRemoved = errors.New("harness: the binary dir was already removed")

// RemoveBinDir removes the temporary directory that BinDir built (the cached reference plugins stay
// cached). Call it once nothing needs the binaries any more, such as from TestMain after m.Run; later
// BinDir calls fail.
func RemoveBinDir() error {
	buildOnce.Do(func() { buildErr = errBinDirRemoved })
	if binDir == "" {
		return nil
	}
	if err := os.RemoveAll(binDir); err != nil {
		return fmt.Errorf("failed to remove %s: %w", binDir, err)
	}
	binDir, buildErr = "", errBinDirRemoved
	return nil
}

// Main runs a test binary's tests and then removes the binary dir, failing the run if that fails.
// Use it as: func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }.
func Main(m interface{ Run() int }) int {
	code := m.Run()
	if err := RemoveBinDir(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
