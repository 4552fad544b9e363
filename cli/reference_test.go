package cli

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/cli.md and the golden files from the current commands")

// TestReferenceIsCurrent: docs/cli.md is what the commands say of themselves.
func TestReferenceIsCurrent(t *testing.T) {
	var b bytes.Buffer
	if err := WriteReference(&b, NewRoot(io.Discard, io.Discard)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "docs", "cli.md")
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cli -update)", err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Fatalf("%s is stale: run go test ./cli -update", path)
	}
}
