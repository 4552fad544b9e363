package cli

import (
	"strings"
	"testing"
)

// TestCompletion: every shell's completion script is generated for netpoolctl, and an unknown
// shell is an error.
func TestCompletion(t *testing.T) {
	for shell, marker := range map[string]string{
		"bash":       "__start_netpoolctl",
		"zsh":        "#compdef netpoolctl",
		"fish":       "complete -c netpoolctl",
		"powershell": "Register-ArgumentCompleter",
	} {
		out, _, err := runCLI(t, "completion", shell)
		if err != nil {
			t.Fatalf("completion %s: %v", shell, err)
		}
		if !strings.Contains(out, marker) {
			t.Errorf("completion %s does not contain %q:\n%.300s", shell, marker, out)
		}
	}
	if _, _, err := runCLI(t, "completion", "tcsh"); err == nil || !strings.Contains(err.Error(), `unknown command "tcsh"`) {
		t.Errorf("completion for an unknown shell: %v", err)
	}
}
