package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/netpool/netpool/test/harness"
)

// TestDemoIsTheBareHostQuickStart runs the demo and checks that the README's bare-host quick start
// is what it does: the same conflist (but for the file's path) and netpoolctl commands that print
// what the README shows (ages and the file's path aside).
func TestDemoIsTheBareHostQuickStart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the demo needs root (network namespaces, a bridge)")
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section, err := harness.MarkdownSection(string(data), "Bare-host quick start (embedded store)")
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	var readmeConf map[string]any
	var readmeCmds []harness.ConsoleCommand
	for _, b := range harness.FencedBlocks(section) {
		switch b.Lang {
		case "json":
			if err := json.Unmarshal([]byte(b.Body), &readmeConf); err != nil {
				t.Fatalf("README bare-host conflist: %v\n%s", err, b.Body)
			}
		case "console":
			readmeCmds = append(readmeCmds, harness.ConsoleCommands(b.Body, "netpoolctl")...)
		}
	}
	if readmeConf == nil || len(readmeCmds) == 0 {
		t.Fatalf("README bare-host quick start: conflist %v, %d netpoolctl commands; want both", readmeConf, len(readmeCmds))
	}

	out := captureStdout(t, func() error { return run(t.Context(), harness.MustCommandBinary(t, "netpoolctl")) })
	t.Logf("demo output:\n%s", out)

	demoConf, demoCmds := parseDemoOutput(t, out)
	readmeDB := bboltPath(t, readmeConf)
	demoDB := bboltPath(t, demoConf)
	setBboltPath(demoConf, readmeDB)
	if !reflect.DeepEqual(demoConf, readmeConf) {
		t.Errorf("the demo's conflist\n%v\nis not the README's\n%v", demoConf, readmeConf)
	}
	if len(demoCmds) != len(readmeCmds) {
		t.Fatalf("the demo runs %d netpoolctl commands, the README shows %d", len(demoCmds), len(readmeCmds))
	}
	for i, d := range demoCmds {
		r := readmeCmds[i]
		args := strings.Join(d.Args, " ")
		if want := strings.ReplaceAll(strings.Join(r.Args, " "), readmeDB, demoDB); args != want {
			t.Errorf("demo command %d is netpoolctl %s, the README's netpoolctl %s", i, args, strings.Join(r.Args, " "))
			continue
		}
		if harness.NormaliseAges(d.Output) != harness.NormaliseAges(r.Output) {
			t.Errorf("netpoolctl %s prints\n%s\nthe README says\n%s", args, d.Output, r.Output)
		}
	}
}

// parseDemoOutput returns the conflist the demo printed and the netpoolctl commands it ran, with
// their output.
func parseDemoOutput(t *testing.T, out string) (map[string]any, []harness.ConsoleCommand) {
	t.Helper()
	var conf strings.Builder
	var ctl strings.Builder
	var in string // the step whose detail lines are being read
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "==> ") {
			in = ""
			switch {
			case strings.HasPrefix(line, "==> Network "):
				in = "conf"
			case strings.HasPrefix(line, "==> The allocations, as netpoolctl shows them"):
				in = "ctl"
			}
			continue
		}
		detail, ok := strings.CutPrefix(line, "    ")
		if !ok {
			continue
		}
		switch in {
		case "conf":
			conf.WriteString(detail + "\n")
		case "ctl":
			ctl.WriteString(detail + "\n")
		}
	}
	var c map[string]any
	if err := json.Unmarshal([]byte(conf.String()), &c); err != nil {
		t.Fatalf("the demo printed no conflist: %v\n%s", err, conf.String())
	}
	return c, harness.ConsoleCommands(ctl.String(), "netpoolctl")
}

// ipamOf returns the ipam section of a one-plugin conflist.
func ipamOf(t *testing.T, conf map[string]any) map[string]any {
	t.Helper()
	plugins, _ := conf["plugins"].([]any)
	if len(plugins) != 1 {
		t.Fatalf("conflist %v: want one plugin", conf)
	}
	plugin, _ := plugins[0].(map[string]any)
	ipam, ok := plugin["ipam"].(map[string]any)
	if !ok {
		t.Fatalf("conflist %v has no ipam section", conf)
	}
	return ipam
}

func bboltPath(t *testing.T, conf map[string]any) string {
	t.Helper()
	b, _ := ipamOf(t, conf)["bbolt"].(map[string]any)
	p, _ := b["path"].(string)
	if p == "" {
		t.Fatalf("conflist %v names no bbolt.path", conf)
	}
	return p
}

func setBboltPath(conf map[string]any, path string) {
	plugins := conf["plugins"].([]any)
	plugins[0].(map[string]any)["ipam"].(map[string]any)["bbolt"].(map[string]any)["path"] = path
}

// captureStdout runs f with os.Stdout sent to a file and returns what was written; f's error
// fails the test.
func captureStdout(t *testing.T, f func() error) string {
	t.Helper()
	file, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = file
	err = f()
	os.Stdout = saved
	data, rerr := os.ReadFile(file.Name())
	_ = file.Close()
	if err != nil || rerr != nil {
		t.Fatalf("demo: %v %v\n%s", err, rerr, data)
	}
	return string(data)
}
