package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root, two floors above this package.
const root = "../.."

// layoutEntries returns the paths the README's Layout block names: the first word of each line,
// with a {a,b} group expanded and the trailing slash dropped. Lines that continue the one above
// (indented) name no path.
func layoutEntries(readme string) ([]string, error) {
	_, rest, ok := strings.Cut(readme, "\n## Layout\n")
	if !ok {
		return nil, errNoLayout
	}
	_, rest, ok = strings.Cut(rest, "\n```\n")
	if !ok {
		return nil, errNoLayout
	}
	block, _, ok := strings.Cut(rest, "\n```")
	if !ok {
		return nil, errNoLayout
	}
	var paths []string
	for _, line := range strings.Split(block, "\n") {
		if line == "" || line[0] == ' ' {
			continue
		}
		paths = append(paths, expand(strings.Fields(line)[0])...)
	}
	return paths, nil
}

type layoutError string

func (e layoutError) Error() string { return string(e) }

const errNoLayout = layoutError("README.md has no \"## Layout\" section with a ``` block")

// expand turns "a/{b,c}/" into "a/b" and "a/c".
func expand(word string) []string {
	word = strings.TrimSuffix(word, "/")
	open, close := strings.Index(word, "{"), strings.Index(word, "}")
	if open < 0 || close < open {
		return []string{word}
	}
	var out []string
	for _, alt := range strings.Split(word[open+1:close], ",") {
		out = append(out, expand(word[:open]+alt+word[close+1:])...)
	}
	return out
}

// uncovered returns the packages (paths relative to the root) the Layout does not describe. A
// package is described when the Layout names it or a folder two or more floors deep above it
// (test/bench covers test/bench/kube; allocator/ covers only the allocator package itself).
func uncovered(entries, packages []string) []string {
	var missing []string
	for _, p := range packages {
		covered := slices.ContainsFunc(entries, func(e string) bool {
			return e == p || (strings.Contains(e, "/") && strings.HasPrefix(p, e+"/"))
		})
		if !covered {
			missing = append(missing, p)
		}
	}
	return missing
}

// TestReadmeLayoutMatchesTree fails when the README's Layout names a path that is not in the tree,
// when a package is missing from it, or when a top-level folder is.
func TestReadmeLayoutMatchesTree(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := layoutEntries(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(root, e)); err != nil {
			t.Errorf("README Layout names %s, which is not in the tree", e)
		}
	}
	if dup := duplicates(entries); len(dup) > 0 {
		t.Errorf("README Layout lists %v more than once", dup)
	}

	out, err := exec.Command("go", "list", "-e", "-f", "{{.Dir}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	var packages []string
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(abs, dir)
		if err != nil {
			t.Fatal(err)
		}
		packages = append(packages, filepath.ToSlash(rel))
	}
	if len(packages) < 40 {
		t.Fatalf("go list found %d packages: %s", len(packages), out)
	}
	for _, p := range uncovered(entries, packages) {
		t.Errorf("package %s is missing from the README Layout", p)
	}

	top, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range top {
		if !d.IsDir() || strings.HasPrefix(d.Name(), ".") || gitIgnores(root, d.Name()) {
			continue
		}
		if !slices.ContainsFunc(entries, func(e string) bool { return e == d.Name() || strings.HasPrefix(e, d.Name()+"/") }) {
			t.Errorf("top-level folder %s/ is missing from the README Layout", d.Name())
		}
	}
}

// gitIgnores reports whether git ignores the top-level folder name (bin/ after make build or
// make cluster): what the build writes there is not the tree's layout. Outside a git checkout
// nothing is ignored.
func gitIgnores(root, name string) bool {
	cmd := exec.Command("git", "check-ignore", "-q", name+"/")
	cmd.Dir = root
	return cmd.Run() == nil
}

func duplicates(s []string) []string {
	seen := map[string]bool{}
	var dup []string
	for _, e := range s {
		if seen[e] {
			dup = append(dup, e)
		}
		seen[e] = true
	}
	return dup
}

// TestLayoutParsing shows that the checks above can fail: a named path, a group, a continued line,
// a covering folder and a package the Layout misses.
func TestLayoutParsing(t *testing.T) {
	readme := "x\n## Layout\n\ntext\n\n```\ncmd/a        main\nc/{d,e}/\n             continued words/\nallocator/   engine\ntest/bench/  b\n```\n## Next\n"
	got, err := layoutEntries(readme)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"cmd/a", "c/d", "c/e", "allocator", "test/bench"}
	if !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	missing := uncovered(got, []string{"cmd/a", "cmd/b", "c/d", "allocator", "allocator/boltstore", "test/bench/kube"})
	if !slices.Equal(missing, []string{"cmd/b", "allocator/boltstore"}) {
		t.Fatalf("uncovered %v, want [cmd/b allocator/boltstore]", missing)
	}
	if _, err := layoutEntries("no layout"); err == nil {
		t.Fatal("a README without a Layout parsed")
	}
	if d := duplicates([]string{"crds", "a", "crds"}); !slices.Equal(d, []string{"crds"}) {
		t.Fatalf("duplicates %v", d)
	}
}
