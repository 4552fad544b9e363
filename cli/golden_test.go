package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testNow is the clock of runCLI: golden files print ages against it.
var testNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// runCLI runs netpoolctl with args and returns what it printed on stdout and stderr and the
// command's error (what main turns into a non-zero exit).
func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRoot(&out, &errOut, func() time.Time { return testNow })
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), errOut.String(), err
}

// assertGolden compares got with testdata/golden/<name>; -update rewrites the file instead.
func assertGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cli -update)", err)
	}
	if string(want) != got {
		t.Fatalf("output differs from %s (run go test ./cli -update after checking it):\n--- got\n%s--- want\n%s", path, got, want)
	}
}
