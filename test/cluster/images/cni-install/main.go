// Command cni-install is the init container of the test cluster's Multus thick DaemonSet: it copies
// each file it is given into the node's CNI bin directory (a hostPath), under a temporary name,
// synced and then renamed, so that a runtime that runs the plugin meanwhile never executes a
// half-written binary. The image has no shell, so this stands in for upstream's `cp`.
// netpool's own installer (cli/install) does the same for its plugins, but the test images import
// no project code (test/layout), so that a change to the product cannot change the fixtures.
//
//	cni-install DIR FILE...
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: cni-install DIR FILE...")
		os.Exit(2)
	}
	dir := os.Args[1]
	for _, src := range os.Args[2:] {
		if err := install(src, dir); err != nil {
			fmt.Fprintln(os.Stderr, "cni-install:", err)
			os.Exit(1)
		}
		fmt.Printf("installed %s in %s\n", filepath.Base(src), dir)
	}
}

func install(src, dir string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	dst := filepath.Join(dir, filepath.Base(src))
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(src)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; a leftover only on failure
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
