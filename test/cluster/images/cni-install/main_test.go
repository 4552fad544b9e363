package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestInstallReplacesTheFileWhole(t *testing.T) {
	src := filepath.Join(t.TempDir(), "multus-shim")
	if err := os.WriteFile(src, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dst := filepath.Join(dir, "multus-shim")
	if err := os.WriteFile(dst, []byte("old, longer"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := install(src, dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(dst)
	if err != nil || string(data) != "new" {
		t.Fatalf("installed %q (%v), want \"new\"", data, err)
	}
	if info, err := os.Stat(dst); err != nil || info.Mode().Perm() != 0o755 {
		t.Fatalf("installed mode %v (%v), want 0755", info.Mode(), err)
	}
	onlyFiles(t, dir, "multus-shim")
}

func TestInstallOfAMissingFileChangesNothing(t *testing.T) {
	dir := t.TempDir()
	if err := install(filepath.Join(t.TempDir(), "absent"), dir); !os.IsNotExist(err) {
		t.Fatalf("install of a missing file: %v, want not-exist", err)
	}
	onlyFiles(t, dir)
}

func TestInstallIntoAMissingDirectoryFails(t *testing.T) {
	src := filepath.Join(t.TempDir(), "multus-shim")
	if err := os.WriteFile(src, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := install(src, filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Fatal("install into a missing directory succeeded")
	}
}

// onlyFiles fails t unless dir holds exactly names (no temporary file left).
func onlyFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if len(got) != len(names) {
		t.Fatalf("%s holds %v, want %v", dir, got, names)
	}
	for i := range names {
		if got[i] != names[i] {
			t.Fatalf("%s holds %v, want %v", dir, got, names)
		}
	}
}
