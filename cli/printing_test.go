package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// kubectlFormat is one of kubectl's output flags that a golden file shows for a view command.
type kubectlFormat struct {
	name string
	args func(items, key string) []string
}

// kubectlFormats are the output flags beyond table, wide, json and yaml (goldenFormats), each
// shown on the list of a document (items) by one field of its items (key).
var kubectlFormats = []kubectlFormat{
	{"name", func(string, string) []string { return []string{"-o", "name"} }},
	{"jsonpath", func(items, key string) []string {
		return []string{"-o", `jsonpath={range .` + items + `[*]}{.` + key + `}{"\n"}{end}`}
	}},
	{"go-template", func(items, key string) []string {
		return []string{"-o", `go-template={{range .` + items + `}}{{.` + key + `}}{{"\n"}}{{end}}`}
	}},
	{"custom-columns", func(_, key string) []string {
		return []string{"-o", "custom-columns=KEY:." + key + ",MISSING:.nothing"}
	}},
	{"no-headers", func(string, string) []string { return []string{"--no-headers"} }},
	{"no-headers-wide", func(string, string) []string { return []string{"-o", "wide", "--no-headers"} }},
}

// viewCommand is a view command and the list and key of its document.
type viewCommand struct {
	name, args, items, key string
	// sortBy is a --sort-by expression that orders its rows otherwise than the default.
	sortBy string
}

func runFormats(t *testing.T, run func(t *testing.T, args ...string) (string, string, error), dir string, cmds []viewCommand, norm func(string) string) {
	for _, c := range cmds {
		for _, f := range kubectlFormats {
			t.Run(c.name+"/"+f.name, func(t *testing.T) {
				out, errOut, err := run(t, append(f.args(c.items, c.key), strings.Fields(c.args)...)...)
				if err != nil {
					t.Fatalf("%v (stderr %q)", err, errOut)
				}
				assertGolden(t, dir+"/"+c.name+"."+f.name, norm(out))
			})
		}
		if c.sortBy != "" {
			for _, format := range []string{"table", "json"} {
				t.Run(c.name+"/sort-by/"+format, func(t *testing.T) {
					out, errOut, err := run(t, append([]string{"-o", format, "--sort-by", c.sortBy}, strings.Fields(c.args)...)...)
					if err != nil {
						t.Fatalf("%v (stderr %q)", err, errOut)
					}
					assertGolden(t, dir+"/"+c.name+".sort-by."+format, norm(out))
				})
			}
		}
	}
}

// TestKubectlFormatsBolt: every kubectl output flag on the views of an embedded store.
func TestKubectlFormatsBolt(t *testing.T) {
	db := boltFixture(t)
	now := viewClock()
	run := func(t *testing.T, args ...string) (string, string, error) {
		return runView(t, now, "", append([]string{"--db", db}, args...)...)
	}
	runFormats(t, run, "bolt", []viewCommand{
		{name: "pools", args: "pools", items: "items", key: "name", sortBy: "{.used}"},
		{name: "show", args: "show tenant-a/10.77.0.0/28", items: "allocations", key: "address", sortBy: ".holder"},
		{name: "whois", args: "whois 10.77.0.2", items: "matches", key: "pool"},
		{name: "pod", args: "pod shop/web-0", items: "allocations", key: "address"},
	}, func(s string) string { return normaliseGolden(s) })
}

// TestKubectlFormatsCluster: the same on a cluster's views.
func TestKubectlFormatsCluster(t *testing.T) {
	f := newClusterFixture(t)
	now := viewClock()
	run := func(t *testing.T, args ...string) (string, string, error) {
		return runView(t, now, "", append([]string{"--kubeconfig", f.env.Kubeconfig}, args...)...)
	}
	runFormats(t, run, "cluster", []viewCommand{
		{name: "pools", args: "pools --network " + ctlNetwork, items: "items", key: "name", sortBy: "{.used}"},
		{name: "show", args: "show " + ctlPoolA, items: "allocations", key: "address", sortBy: ".holder"},
		{name: "whois", args: "whois 10.78.0.2", items: "matches", key: "pool"},
		{name: "pod", args: "pod " + ctlNS + "/web-0", items: "allocations", key: "address"},
	}, func(s string) string { return normaliseGolden(s, f.replace...) })

	t.Run("-n narrows show to a namespace's pods", func(t *testing.T) {
		out, _, err := run(t, "-n", "elsewhere", "show", ctlPoolA, "--no-headers")
		if err != nil || out != "" {
			t.Fatalf("show -n elsewhere: %q, %v; want no rows", out, err)
		}
		out, _, err = run(t, "-n", ctlNS, "show", ctlPoolA, "--no-headers")
		if err != nil || strings.Count(out, "\n") != 2 {
			t.Fatalf("show -n %s: %q, %v; want its two rows", ctlNS, out, err)
		}
	})
	t.Run("-n gives pod and release --pod a name alone", func(t *testing.T) {
		out, _, err := run(t, "-n", ctlNS, "pod", "web-0", "-o", "name")
		if err != nil || strings.Count(out, "overlappingrangeipreservation.ipam.netpool.io/") != 2 {
			t.Fatalf("pod web-0 -n %s: %q, %v", ctlNS, out, err)
		}
		_, _, err = run(t, "-n", "elsewhere", "pod", ctlNS+"/web-0")
		if err == nil || !strings.Contains(err.Error(), "but -n says elsewhere") {
			t.Fatalf("a pod of another namespace than -n: %v", err)
		}
		_, _, err = run(t, "pod", "web-0")
		if err == nil || !strings.Contains(err.Error(), "NAME with -n NAMESPACE") {
			t.Fatalf("a bare pod name without -n: %v", err)
		}
	})
	t.Run("--as impersonates", func(t *testing.T) {
		_, _, err := run(t, "--as", "ctlview-nobody", "pools")
		if err == nil || !strings.Contains(err.Error(), `User "ctlview-nobody" cannot list`) {
			t.Fatalf("pools --as a user without a role: %v; want forbidden for that user", err)
		}
		_, _, err = run(t, "--as", "ctlview-nobody", "--as-group", "system:masters", "pools")
		if err != nil {
			t.Fatalf("pools --as with --as-group system:masters: %v", err)
		}
	})
	t.Run("--server and --token reach the cluster as the kubeconfig does", func(t *testing.T) {
		_, _, err := runView(t, now, "", "--kubeconfig", f.env.Kubeconfig, "--server", "https://127.0.0.1:1", "pools")
		if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Fatalf("pools --server at a closed port: %v; want an error naming it", err)
		}
	})
	t.Run("unknown --network lists the networks", func(t *testing.T) {
		for _, args := range [][]string{{"pools", "--network", "ctlview-typo"}, {"check", "--network", "ctlview-typo"}} {
			_, _, err := run(t, args...)
			if err == nil || !strings.Contains(err.Error(), `"ctlview-typo"`) || !strings.Contains(err.Error(), ctlNetwork) {
				t.Errorf("%s: %v; want an error naming the networks there are", args[0], err)
			}
		}
	})
}

// TestOutputFlagErrors: a malformed output flag is an error naming it, before anything is read.
func TestOutputFlagErrors(t *testing.T) {
	db := boltFixture(t)
	file := filepath.Join(t.TempDir(), "columns")
	if err := os.WriteFile(file, []byte("A B\n.a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "xml", "pools"}, `unknown output format "xml"`},
		{[]string{"-o", "jsonpath=", "pools"}, "needs its argument after the ="},
		{[]string{"-o", "jsonpath", "pools"}, "needs a template"},
		{[]string{"-o", "jsonpath={.items[", "pools"}, "-o jsonpath"},
		{[]string{"-o", "go-template={{.items", "pools"}, "-o go-template"},
		{[]string{"-o", "custom-columns=NAME", "pools"}, `"NAME" is not HEADER:JSONPATH`},
		{[]string{"-o", "custom-columns-file=" + file, "pools"}, "2 headers but 1 expressions"},
		{[]string{"-o", "jsonpath-file=/nonexistent/x", "pools"}, "no such file"},
		{[]string{"--sort-by", "{.items[", "pools"}, "--sort-by"},
		{[]string{"--as", "someone", "pools"}, "--db selects an embedded store: it cannot be combined with --as"},
		{[]string{"--request-timeout", "soon", "pools"}, `--request-timeout "soon"`},
		{[]string{"show"}, "show takes one POOL, not 0 arguments"},
		{[]string{"whois"}, "whois takes one IP address, not 0 arguments"},
		{[]string{"pools", "--network", "nope"}, `no pool of network "nope" in the bbolt: its networks are "" (the unnamed network), tenant-a`},
	} {
		out, _, err := runView(t, viewClock(), "", append([]string{"--db", db}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error containing %q", tc.args, err, tc.want)
		}
		if out != "" {
			t.Errorf("%v: a failed command printed %q", tc.args, out)
		}
	}
}

// TestHumanCount: counts print exactly up to six digits, then to three significant digits.
func TestHumanCount(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0", "255": "255", "999999": "999999", "1000000": "1.00M", "16777214": "16.8M",
		"18446744073709551615": "18.4E", "18446744073709551616": "18.4E", "1208925819614629174706176": "1.21Y",
		"340282366920938463463374607431768211455": "~2^128", "": "", "x": "x",
	} {
		if got := humanCount(in); got != want {
			t.Errorf("humanCount(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPoolsUsedFromStatus: with every pool counted by the controller (status.allocated), pools
// takes that count (one request); --count counts the reservations now.
func TestPoolsUsedFromStatus(t *testing.T) {
	e := newLCEnv(t)
	p := e.pool("ctlops-usedfrom", ipamv1.IPPoolSpec{Range: "10.77.5.0/24", NetworkName: "ctlops-usedfrom"})
	e.reservation(p, "10.77.5.10", "ctlops-usedfrom/a", "uid-a", "node-a", "")
	e.setStatusCounts(p, "254", 7, "247")
	kc := []string{"--kubeconfig", e.env.Kubeconfig}
	out, _, err := runCLI(t, append(kc, "pools", "--network", "ctlops-usedfrom", "-o", "jsonpath={.items[0].used} {.items[0].usedFrom}")...)
	if err != nil || out != "7 status" {
		t.Fatalf("pools: %q, %v; want the controller's count 7", out, err)
	}
	out, _, err = runCLI(t, append(kc, "pools", "--count", "--network", "ctlops-usedfrom", "-o", "jsonpath={.items[0].used} {.items[0].usedFrom}")...)
	if err != nil || out != "1 reservations" {
		t.Fatalf("pools --count: %q, %v; want the 1 reservation counted now", out, err)
	}
}

// TestUtilizationSaysExhausted: UTIL names an exhausted pool, which an embedded store's READY
// cannot; a pool with an address left, or with no known capacity, says only its figure.
func TestUtilizationSaysExhausted(t *testing.T) {
	pct := func(f float64) *float64 { return &f }
	for _, tc := range []struct {
		v    poolView
		want string
	}{
		{poolView{UtilizationPercent: pct(100), Exhausted: true}, "100.0% (Exhausted)"},
		{poolView{UtilizationPercent: pct(99.6)}, "99.6%"},
		{poolView{}, ""},
	} {
		if got := utilization(tc.v); got != tc.want {
			t.Errorf("utilization(%+v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
