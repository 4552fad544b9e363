package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/netpool/netpool/internal/version"
)

// NewRoot returns the netpoolctl command tree, writing to out and errOut.
func NewRoot(out, errOut io.Writer) *cobra.Command { return newRoot(out, errOut, time.Now) }

// newRoot is NewRoot with a clock, so tests print fixed ages.
func newRoot(out, errOut io.Writer, now func() time.Time) *cobra.Command {
	root := &cobra.Command{
		Use:           "netpoolctl",
		Short:         "Install, inspect and repair netpool",
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version, and the version command below, print what make build stamped.
		Version: version.String(),
	}
	opts := &options{now: now}
	opts.addFlags(root.PersistentFlags())
	registerRootCompletions(root, opts)
	root.SetVersionTemplate("netpoolctl {{.Version}}\n")
	root.SetOut(out)
	root.SetErr(errOut)
	root.AddCommand(
		newInstallCNI(),
		newVersion(),
		newPools(opts),
		newShow(opts),
		newPod(opts),
		newWhois(opts),
		newRelease(opts),
		newLeaks(opts),
		newCheck(opts),
		newMigrate(opts),
	)
	// The completion command is made here rather than at Execute, so docs/cli.md lists it.
	root.InitDefaultCompletionCmd()
	refuseUnknownShells(root)
	return root
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print netpoolctl's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version.Line("netpoolctl"))
			return err
		},
	}
}

// refuseUnknownShells makes `netpoolctl completion SHELL` fail for a shell cobra has no script
// for, where cobra would print the help and exit 0: a runnable command with subcommands rejects
// an argument that names none of them ("unknown command").
func refuseUnknownShells(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	}
}
