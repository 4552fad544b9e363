package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/netpool/netpool/cni-plugin/ipamplugin"
	"github.com/netpool/netpool/ipam"
)

// The directories a forwarded call's files may be in. The agent runs as root with the cluster
// credentials of its node, and configuration_path and log_file come from whoever wrote the NAD,
// so the agent reads and writes only where the operator put netpool's files, never where a NAD
// points (README, configuration reference). --extra-config-dir and --extra-log-dir add others
// (k3s and RKE2 keep CNI files under /var/lib/rancher/k3s/agent/etc/cni/net.d).
var (
	// DefaultConfigDirs hold the flat config files (configuration_path): the directories of
	// ipam.DefaultFlatConfigPaths. The DaemonSet mounts the host's /etc/cni/net.d.
	DefaultConfigDirs = ipam.AgentConfigDirs
	// DefaultLogDir holds the log files (log_file) the agent writes; a call whose log_file lies
	// elsewhere logs to the agent's own stderr. The DaemonSet mounts the host's /var/log/netpool.
	DefaultLogDir = ipam.AgentLogDir
)

// Dirs returns the config and log directories f serves: the defaults, then f's extra ones. An
// extra directory must be absolute and may not be "/", which would serve every file of the node.
func (f Flags) Dirs() (config, logs []string, err error) {
	config = append(slices.Clone(DefaultConfigDirs), f.ExtraConfigDirs...)
	logs = append([]string{DefaultLogDir}, f.ExtraLogDirs...)
	for _, d := range append(slices.Clone(f.ExtraConfigDirs), f.ExtraLogDirs...) {
		if !filepath.IsAbs(d) || filepath.Clean(d) == "/" {
			return nil, nil, fmt.Errorf("extra directory %q: want an absolute directory other than /", d)
		}
	}
	return config, logs, nil
}

// errOutsideDirs is returned for a path outside the directories the agent serves files from.
var errOutsideDirs = errors.New("outside the directories the netpool agent serves")

// within returns path with its symbolic links resolved, or an error unless it lies inside one of
// dirs (themselves resolved). Resolving first is what stops "/etc/cni/net.d/../../etc/shadow" and
// a link planted inside a directory.
func within(path string, dirs []string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("%s is not an absolute path", path)
	}
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		// A log file may not exist yet: resolve its directory, and keep the name.
		dir, derr := filepath.EvalSymlinks(filepath.Dir(path))
		if derr != nil {
			return "", err
		}
		real = filepath.Join(dir, filepath.Base(path))
	} else if err != nil {
		return "", err
	}
	resolved := make([]string, 0, len(dirs))
	for _, d := range dirs {
		rd, err := filepath.EvalSymlinks(d)
		if err != nil {
			rd = filepath.Clean(d)
		}
		resolved = append(resolved, rd)
	}
	if ipam.InDirs(real, resolved) {
		return real, nil
	}
	return "", fmt.Errorf("%s: %w (%s)", path, errOutsideDirs, strings.Join(dirs, ", "))
}

// readConfig is the agent's ipam.FlatReader: ipamplugin.ReadConfigFile, confined to the
// config directories. A missing file stays fs.ErrNotExist, so the default paths are skipped; so
// is a default path outside the directories (an agent configured with others).
func (a *Agent) readConfig(path string) ([]byte, error) {
	real, err := within(path, a.opts.ConfigDirs)
	if errors.Is(err, errOutsideDirs) && slices.Contains(ipam.DefaultFlatConfigPaths, path) {
		return nil, fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	if err != nil {
		return nil, err
	}
	return ipamplugin.ReadConfigFile(real)
}

// openLog is the agent's log_file opener: ipamplugin.OpenLogFile, confined to the log directory.
func (a *Agent) openLog(path string) (io.WriteCloser, error) {
	real, err := within(path, a.opts.LogDirs)
	if err != nil {
		return nil, err
	}
	return ipamplugin.OpenLogFile(real)
}
