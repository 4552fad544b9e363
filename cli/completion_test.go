package cli

import (
	"strings"
	"testing"
	"time"
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

// completions runs cobra's __complete for args (the last one the word being completed) and
// returns the offered values and the directive line.
func completions(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	out, _, err := runCLI(t, append([]string{"__complete"}, args...)...)
	if err != nil {
		t.Fatalf("__complete %v: %v", args, err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	directive := lines[len(lines)-1]
	return lines[:len(lines)-1], directive
}

func TestCompletionValues(t *testing.T) {
	f := newClusterFixture(t)
	db := boltFixture(t)
	kc := []string{"--kubeconfig", f.env.Kubeconfig}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"pool names", append(kc, "show", "ctlview-"), []string{ctlPoolA, ctlPoolB}},
		{"pool names of a file", []string{"--db", db, "show", "tenant-a/"}, []string{"tenant-a/10.77.0.0/28", "tenant-a/fd00:77::/120"}},
		{"only the first argument", append(kc, "show", ctlPoolA, ""), nil},
		{"held addresses", append(kc, "whois", "10.78."), []string{"10.78.0.2", "10.78.0.5"}},
		{"held addresses of a file", []string{"--db", db, "release", "10.77."}, []string{"10.77.0.2", "10.77.0.3"}},
		{"networks", append(kc, "pools", "--network", "ctlview"), []string{ctlNetwork}},
		{"pods", append(kc, "release", "--pod", ctlNS+"/"), []string{ctlNS + "/gone-0", ctlNS + "/web-0"}},
		{"pods of -n", append(kc, "-n", ctlNS, "pod", ""), []string{"gone-0", "web-0"}},
		{"pools of release", append(kc, "release", "--pool", "ctlview-b"), []string{ctlPoolB}},
		{"namespaces", append(kc, "pools", "-n", "ctlvie"), []string{ctlNS}},
		{"namespaces of a file", []string{"--db", db, "show", "-n", ""}, []string{"shop"}},
		{"output formats", []string{"pools", "-o", "js"}, []string{"json", "jsonpath=", "jsonpath-file=", "jsonpath-as-json="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, directive := completions(t, tc.args...)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("offered %q, want %q", got, tc.want)
			}
			if !strings.HasPrefix(directive, ":") {
				t.Fatalf("no directive line: %q", directive)
			}
		})
	}
	t.Run("contexts", func(t *testing.T) {
		got, _ := completions(t, append(kc, "pools", "--context", "")...)
		if len(got) == 0 {
			t.Fatal("no context offered from the kubeconfig")
		}
	})
	t.Run("an unreachable cluster offers nothing, quickly", func(t *testing.T) {
		start := time.Now()
		got, _ := completions(t, "--kubeconfig", f.env.Kubeconfig, "--server", "https://10.255.255.1:6443", "show", "")
		if len(got) != 0 {
			t.Fatalf("offered %q from nowhere", got)
		}
		if d := time.Since(start); d > completionTimeout+3*time.Second {
			t.Fatalf("completion took %s, past its %s bound", d, completionTimeout)
		}
	})
}
