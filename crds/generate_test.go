package crds_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// generatedDirs are the directories hack/generate.sh writes, relative to the checkout, with the
// pattern of the files it owns there: a committed file that matches the pattern but that the
// generator no longer writes is stale too.
var generatedDirs = map[string]string{
	"crds/bases":         "*.netpool.io_*.yaml",
	"deploy/base/crds":   "*.netpool.io_*.yaml",
	"crds/ipam/v1alpha1": "zz_generated.*.go",
	"crds/network/v1":    "zz_generated.*.go",
}

// TestGeneratedFilesAreUpToDate runs the generator into a temporary directory and compares its
// output with the committed files byte for byte. On a fresh machine hack/generate.sh first builds
// controller-gen (pinned in hack/tools/go.mod) into the cache.
func TestGeneratedFilesAreUpToDate(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(root, "hack", "generate.sh"), out)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/generate.sh %s: %v\n%s", out, err, b)
	}
	problems, err := compareTrees(out, root, generatedDirs)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) == 0 && countFiles(t, out) == 0 {
		t.Fatal("the generator wrote nothing")
	}
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Log("run `make generate` and commit the result")
	}
}

// compareTrees compares the files under generated with their counterparts under committed, and
// reports every generated file that is missing or different in committed, and every committed file
// in one of dirs that matches its pattern but was not generated.
func compareTrees(generated, committed string, dirs map[string]string) ([]string, error) {
	var problems []string
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		pattern := dirs[dir]
		gen, err := filepath.Glob(filepath.Join(generated, dir, pattern))
		if err != nil {
			return nil, fmt.Errorf("failed to list %s: %w", dir, err)
		}
		com, err := filepath.Glob(filepath.Join(committed, dir, pattern))
		if err != nil {
			return nil, fmt.Errorf("failed to list %s: %w", dir, err)
		}
		names := map[string]bool{}
		for _, g := range gen {
			name := filepath.Join(dir, filepath.Base(g))
			names[name] = true
			want, err := os.ReadFile(g)
			if err != nil {
				return nil, fmt.Errorf("failed to read the generated %s: %w", name, err)
			}
			got, err := os.ReadFile(filepath.Join(committed, name))
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s is not committed (%v)", name, err))
				continue
			}
			if !bytes.Equal(got, want) {
				problems = append(problems, fmt.Sprintf("%s is stale: %s", name, firstDifference(got, want)))
			}
		}
		for _, c := range com {
			if name := filepath.Join(dir, filepath.Base(c)); !names[name] {
				problems = append(problems, fmt.Sprintf("%s is committed but no longer generated", name))
			}
		}
	}
	return problems, nil
}

// firstDifference describes the first line where the committed text differs from the generated.
func firstDifference(committed, generated []byte) string {
	c := slices.Collect(strings.Lines(string(committed)))
	g := slices.Collect(strings.Lines(string(generated)))
	for i := 0; ; i++ {
		switch {
		case i >= len(c) && i >= len(g):
			return "they differ"
		case i >= len(c):
			return fmt.Sprintf("the committed file ends before line %d, which the generator writes as %q", i+1, g[i])
		case i >= len(g):
			return fmt.Sprintf("the generator ends before line %d, which the committed file has as %q", i+1, c[i])
		case c[i] != g[i]:
			return fmt.Sprintf("line %d is %q, the generator writes %q", i+1, c[i], g[i])
		}
	}
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCompareTrees(t *testing.T) {
	dirs := map[string]string{"bases": "*.yaml"}
	write := func(t *testing.T, root string, files map[string]string) {
		t.Helper()
		for name, content := range files {
			path := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	generated := map[string]string{"bases/a.yaml": "a: 1\nb: 2\n", "bases/b.yaml": "b\n"}
	tests := []struct {
		name      string
		committed map[string]string
		want      []string
	}{
		{name: "identical", committed: map[string]string{"bases/a.yaml": "a: 1\nb: 2\n", "bases/b.yaml": "b\n", "bases/notes.txt": "not owned"}},
		{
			name:      "one line changed",
			committed: map[string]string{"bases/a.yaml": "a: 1\nb: 3\n", "bases/b.yaml": "b\n"},
			want:      []string{`bases/a.yaml is stale: line 2 is "b: 3\n", the generator writes "b: 2\n"`},
		},
		{
			name:      "a line missing at the end",
			committed: map[string]string{"bases/a.yaml": "a: 1\n", "bases/b.yaml": "b\n"},
			want:      []string{`bases/a.yaml is stale: the committed file ends before line 2, which the generator writes as "b: 2\n"`},
		},
		{
			name:      "an extra line at the end",
			committed: map[string]string{"bases/a.yaml": "a: 1\nb: 2\nc: 3\n", "bases/b.yaml": "b\n"},
			want:      []string{`bases/a.yaml is stale: the generator ends before line 3, which the committed file has as "c: 3\n"`},
		},
		{
			name:      "only a trailing newline differs",
			committed: map[string]string{"bases/a.yaml": "a: 1\nb: 2\n", "bases/b.yaml": "b"},
			want:      []string{`bases/b.yaml is stale: line 1 is "b", the generator writes "b\n"`},
		},
		{
			name:      "not committed",
			committed: map[string]string{"bases/a.yaml": "a: 1\nb: 2\n"},
			want:      []string{"bases/b.yaml is not committed"},
		},
		{
			name:      "committed but no longer generated",
			committed: map[string]string{"bases/a.yaml": "a: 1\nb: 2\n", "bases/b.yaml": "b\n", "bases/old.yaml": "old\n"},
			want:      []string{"bases/old.yaml is committed but no longer generated"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gen, com := t.TempDir(), t.TempDir()
			write(t, gen, generated)
			write(t, com, tt.committed)
			got, err := compareTrees(gen, com, dirs)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("problems %q, want %q", got, tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Fatalf("problem %q, want it to start with %q", got[i], tt.want[i])
				}
			}
		})
	}
}

func TestCompareTreesUnreadableGeneratedFile(t *testing.T) {
	gen, com := t.TempDir(), t.TempDir()
	// A directory that matches the pattern cannot be read as a file.
	if err := os.MkdirAll(filepath.Join(gen, "bases", "x.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := compareTrees(gen, com, map[string]string{"bases": "*.yaml"})
	if err == nil || !strings.Contains(err.Error(), "failed to read the generated bases/x.yaml") {
		t.Fatalf("got %v, want a read error naming bases/x.yaml", err)
	}
}

func TestCompareTreesBadPattern(t *testing.T) {
	_, err := compareTrees(t.TempDir(), t.TempDir(), map[string]string{"bases": "[" /* unterminated class */})
	if err == nil || !strings.Contains(err.Error(), "failed to list bases") {
		t.Fatalf("got %v, want a glob error", err)
	}
}
