package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/netpool/netpool/cli/install"
	"github.com/netpool/netpool/ipam"
)

func newInstallCNI() *cobra.Command {
	o := install.Options{Flat: &install.FlatConfig{}}
	var noFlat bool
	cmd := &cobra.Command{
		Use:   "install-cni",
		Short: "Install the netpool CNI plugins and the node's flat config (the DaemonSet's init container)",
		Long: `install-cni copies the netpool CNI plugin (and netpool-egress-router, when present) from
--source-dir into the host's CNI bin directory, and writes the global flat config
<net-dir>/` + install.FlatConfigName + ` from the flags. Each file is written under a temporary name,
fsynced and renamed into place, so a runtime that execs the plugin mid-upgrade runs the old binary
or the new one, never a part of either. Running it again changes nothing. Host directories are
never created: a missing one means the host path is not mounted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if noFlat {
				o.Flat = nil
			}
			changes, err := install.Install(o)
			for _, c := range changes {
				state := "installed"
				if !c.Changed {
					state = "unchanged"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", state, c.Path)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.SourceDir, "source-dir", install.DefaultSourceDir, "directory holding the binaries to install")
	f.StringVar(&o.CNIBinDir, "cni-bin-dir", install.DefaultCNIBinDir, "the host's CNI bin directory, as mounted here")
	f.StringVar(&o.NetDir, "net-dir", install.DefaultNetDir, "the host's CNI config directory, as mounted here")
	f.BoolVar(&noFlat, "no-flat-config", false, "install the binaries only; leave the flat config alone")
	f.StringVar(&o.Flat.Datastore, "datastore", ipam.DatastoreKubernetes, "datastore of the node's NADs: kubernetes or bbolt")
	f.StringVar(&o.Flat.AgentSocket, "agent-socket", ipam.DefaultAgentSocket, "the node agent's socket, as the plugin sees it")
	f.StringVar(&o.Flat.BboltPath, "bbolt-path", "", "datastore bbolt: the store file (default "+ipam.DefaultBboltPath+")")
	f.DurationVar(&o.Flat.LockTimeout, "lock-timeout", time.Duration(0), "how long a call waits for the store (default "+ipam.DefaultLockTimeout.String()+")")
	f.StringVar(&o.Flat.LogLevel, "log-level", "", "the plugin's log level: "+ipam.LogLevelWords)
	f.StringVar(&o.Flat.LogFile, "log-file", "", "the plugin's log file (default stderr)")
	return cmd
}
