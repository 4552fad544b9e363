package install

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Defaults of Options: the paths the DaemonSet mounts the host's directories at.
const (
	DefaultSourceDir = "/"
	DefaultCNIBinDir = "/host/opt/cni/bin"
	DefaultNetDir    = "/host/etc/cni/net.d"
)

// FlatConfigName is where, under the net dir, the global flat file goes: the first of the paths the
// plugin searches (ipam.DefaultFlatConfigPaths).
const FlatConfigName = "netpool.d/netpool.conf"

// Plugins are the binaries installed, in order. The first is required; the others are installed
// when the image holds them.
var Plugins = []string{"netpool", "netpool-egress-router"}

// Options say what to install where.
type Options struct {
	// SourceDir holds the binaries to install (the image's root).
	SourceDir string
	// CNIBinDir is the host's CNI bin directory as mounted here. It must exist.
	CNIBinDir string
	// NetDir is the host's CNI config directory as mounted here; the flat file goes to
	// NetDir/FlatConfigName. It must exist.
	NetDir string
	// Flat is the global flat configuration; nil writes none.
	Flat *FlatConfig
}

// Change is one file the installer looked at.
type Change struct {
	Path    string
	Changed bool // false: it already held exactly this
}

// Install copies the plugins into CNIBinDir and writes the flat file, each atomically, and returns
// what it did. Running it again with the same inputs changes nothing. It checks every input before
// it writes anything, so a bad flag or a missing host path leaves the node as it was.
func Install(o Options) ([]Change, error) {
	type file struct {
		path string
		data []byte
		perm os.FileMode
	}
	var files []file
	for i, name := range Plugins {
		src := filepath.Join(o.SourceDir, name)
		data, err := readRegular(src)
		if errors.Is(err, fs.ErrNotExist) && i > 0 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("plugin %s: %w", name, err)
		}
		files = append(files, file{filepath.Join(o.CNIBinDir, name), data, 0o755})
	}
	if err := requireDir(o.CNIBinDir, "CNI bin dir"); err != nil {
		return nil, err
	}
	if o.Flat != nil {
		data, err := o.Flat.Marshal()
		if err != nil {
			return nil, err
		}
		if err := requireDir(o.NetDir, "CNI config dir"); err != nil {
			return nil, err
		}
		flatPath := filepath.Join(o.NetDir, FlatConfigName)
		if err := os.MkdirAll(filepath.Dir(flatPath), 0o755); err != nil {
			return nil, hostPathError(o.NetDir, err)
		}
		files = append(files, file{flatPath, data, 0o644})
	}
	var changes []Change
	for _, f := range files {
		changed, err := replaceFile(f.path, f.data, f.perm)
		if err != nil {
			return changes, err
		}
		changes = append(changes, Change{Path: f.path, Changed: changed})
	}
	return changes, nil
}

// readRegular reads a regular file; a directory or a device in its place is an error.
func readRegular(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return os.ReadFile(path)
}

// requireDir fails clearly when a host directory is not mounted where it should be. It is never
// created: a missing one means the DaemonSet's hostPath is wrong, and a directory made inside the
// container would be lost with it.
func requireDir(dir, what string) error {
	if dir == "" || !filepath.IsAbs(dir) {
		return fmt.Errorf("%s %q must be an absolute path", what, dir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", what, hostPathError(dir, err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s %s is not a directory", what, dir)
	}
	return nil
}
