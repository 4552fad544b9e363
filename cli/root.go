package cli

import (
	"io"

	"github.com/spf13/cobra"
)

// NewRoot returns the netpoolctl command tree, writing to out and errOut.
func NewRoot(out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "netpoolctl",
		Short:         "Install, inspect and repair netpool",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.AddCommand(newInstallCNI())
	return root
}
