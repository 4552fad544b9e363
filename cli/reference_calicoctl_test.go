package cli

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestCalicoctlTable: every netpoolctl line of the calicoctl table names a command that exists,
// with flags it has, and arguments it takes.
func TestCalicoctlTable(t *testing.T) {
	root := NewRoot(io.Discard, io.Discard)
	for _, r := range calicoctlRows {
		for _, l := range r.netpoolctl {
			if err := checkCommandLine(root, l); err != nil {
				t.Errorf("%s -> %s: %v", r.calicoctl, l, err)
			}
		}
	}
}

// TestCalicoctlTableCheck: the check refuses a command, flags and arguments netpoolctl lacks.
func TestCalicoctlTableCheck(t *testing.T) {
	root := NewRoot(io.Discard, io.Discard)
	for _, l := range []commandLine{
		{path: "ipam show"},
		{path: "pools", flags: []string{"--show-blocks"}},
		{path: "pools", flags: []string{"-x"}},
		{path: "show"},
		{path: "whois", args: []string{"A", "B"}},
	} {
		if err := checkCommandLine(root, l); err == nil {
			t.Errorf("%s passed the check", l)
		}
	}
}

// checkCommandLine finds l's command under root and checks its flags and arguments.
func checkCommandLine(root *cobra.Command, l commandLine) error {
	c, rest, err := root.Find(strings.Fields(l.path))
	if err != nil {
		return err
	}
	if len(rest) > 0 || c == root {
		return fmt.Errorf("no command %q", l.path)
	}
	for _, f := range l.flags {
		name := strings.Fields(f)[0]
		var found bool
		if long, ok := strings.CutPrefix(name, "--"); ok {
			found = c.Flags().Lookup(long) != nil || c.InheritedFlags().Lookup(long) != nil
		} else {
			short := strings.TrimPrefix(name, "-")
			found = c.Flags().ShorthandLookup(short) != nil || c.InheritedFlags().ShorthandLookup(short) != nil
		}
		if !found {
			return fmt.Errorf("%s has no flag %s", c.CommandPath(), name)
		}
	}
	if c.Args != nil {
		return c.Args(c, l.args)
	}
	return nil
}
