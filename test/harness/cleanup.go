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
