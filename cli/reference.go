package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// WriteReference writes the Markdown command reference (docs/cli.md) of root and every command
// below it, from the commands themselves, so the page cannot drift from the code.
func WriteReference(w io.Writer, root *cobra.Command) error {
	if _, err := fmt.Fprintf(w, "# netpoolctl command reference\n\nGenerated from the commands by `go test ./cli -update`; a test fails when it is stale.\n"); err != nil {
		return err
	}
	if err := writeCalicoctlTable(w); err != nil {
		return err
	}
	return writeCommand(w, root)
}

func writeCommand(w io.Writer, c *cobra.Command) error {
	if c.Hidden || c.Name() == "help" {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## `%s`\n\n%s\n", c.CommandPath(), c.Short)
	if c.Long != "" {
		fmt.Fprintf(&b, "\n%s\n", c.Long)
	}
	fmt.Fprintf(&b, "\n```\n%s\n```\n", c.UseLine())
	if flags := c.LocalFlags().FlagUsages(); flags != "" {
		fmt.Fprintf(&b, "\nFlags:\n\n```\n%s```\n", flags)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	for _, sub := range c.Commands() {
		if err := writeCommand(w, sub); err != nil {
			return err
		}
	}
	return nil
}
