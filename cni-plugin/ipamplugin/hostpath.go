package ipamplugin

import (
	"errors"
	"io/fs"
	"path/filepath"
)

// thickHostPrefixes are where Multus 4's thick DaemonSet (multus-daemonset-thick.yml) shows the
// node's file system to the delegates it runs inside its multus-daemon container: the host's /run
// is mounted at /host/run, /etc/cni/net.d at /host/etc/cni/net.d, and the host's root at /hostroot.
// The container's own /run does not hold the agent's socket, so a plugin run there that dialled
// /run/netpool/agent.sock would get 11 for ever.
var thickHostPrefixes = []string{"/host", "/hostroot"}

// hostPath returns where the host path p is seen from this process: p itself when it exists (a
// runtime or thin Multus on the host), else the first thick-mode view of it that exists, else p
// (so the error names the path the operator configured). Only a missing path falls through: a path
// that exists but cannot be used is reported as it is.
func hostPath(p string, stat func(string) (fs.FileInfo, error)) string {
	if !filepath.IsAbs(p) {
		return p
	}
	if _, err := stat(p); !errors.Is(err, fs.ErrNotExist) {
		return p
	}
	for _, prefix := range thickHostPrefixes {
		alt := filepath.Join(prefix, p)
		if _, err := stat(alt); err == nil {
			return alt
		}
	}
	return p
}
