package ipam

import (
	"path/filepath"
	"strings"
)

// The directories the node agent serves a forwarded call's files from by default. The agent runs
// as root with its node's credentials, and configuration_path and log_file come from whoever wrote
// the NAD, so it reads and writes only under these (and the directories its --extra-config-dir and
// --extra-log-dir add); netpoolctl migrate whereabouts flags NADs whose paths lie elsewhere.
var (
	// AgentConfigDirs hold the flat config files (configuration_path): the directories of
	// DefaultFlatConfigPaths that the DaemonSet mounts.
	AgentConfigDirs = []string{"/etc/cni/net.d", "/etc/kubernetes/cni/net.d"}
	// AgentLogDir holds the log files (log_file); a call whose log_file lies elsewhere logs to
	// the agent's own stderr.
	AgentLogDir = "/var/log/netpool"
)

// InDirs reports whether path, absolute and already cleaned of symbolic links by the caller if
// the file system is at hand, lies inside one of dirs (or is one of them). It is lexical: "..",
// doubled and trailing slashes are cleaned first, so "/etc/cni/net.d/../shadow" is outside.
func InDirs(path string, dirs []string) bool {
	if !filepath.IsAbs(path) {
		return false
	}
	path = filepath.Clean(path)
	for _, d := range dirs {
		d = filepath.Clean(d)
		if path == d || strings.HasPrefix(path, d+string(filepath.Separator)) || d == string(filepath.Separator) {
			return true
		}
	}
	return false
}
