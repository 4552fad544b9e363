package cli

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/internal/scheme"
)

// viewClock is the clock of the view commands' golden tests: the objects and allocations they
// make are created now, by the real API server or store, so the clock is derived from the time
// of the test: ten hours on, where kubectl's ages print whole hours ("10h") whatever the seconds.
func viewClock() time.Time { return time.Now().Add(10 * time.Hour) }

// runView runs netpoolctl with stdin and the clock now.
func runView(t *testing.T, now time.Time, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRoot(&out, &errOut, func() time.Time { return now })
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), errOut.String(), err
}

var timestampRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)

// normaliseGolden replaces the real timestamps of json and yaml output, and the strings of replace
// (pairs: real, stable), so golden files stay the same from run to run.
func normaliseGolden(s string, replace ...string) string {
	s = timestampRE.ReplaceAllString(s, "2030-01-02T03:04:05Z")
	return strings.NewReplacer(replace...).Replace(s)
}

// goldenFormats are the -o values every view command has a golden file of.
var goldenFormats = []string{"table", "wide", "json", "yaml"}

// newREST is netpoolctl's own client of the API server of cfg (the one source.go makes).
func newREST(t *testing.T, cfg *rest.Config) *kubeclient.REST {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubeclient.New(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
