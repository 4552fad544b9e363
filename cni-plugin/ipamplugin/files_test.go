package ipamplugin

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netpool/netpool/ipam"
)

// TestConfigurationPathIsBounded: configuration_path comes from the NAD. Whatever it names, the
// call ends at once with code 7 naming the path, reads no more than the limit, and never echoes
// what the file holds.
func TestConfigurationPathIsBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.conf")
	if err := os.WriteFile(huge, []byte(`{"range":"10.9.0.0/24"`+strings.Repeat(" ", ipam.MaxFlatConfigSize)+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("root:SECRET-HASH:19000:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secretJSON := filepath.Join(dir, "secret.json")
	if err := os.WriteFile(secretJSON, []byte(`{"SECRET-KEY":"SECRET-VALUE"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	secretTyped := filepath.Join(dir, "typed.json")
	if err := os.WriteFile(secretTyped, []byte(`{"range":["SECRET-VALUE"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ path, want string }{
		{"/dev/zero", "is not a regular file"},
		{fifo, "is not a regular file"},
		{dir, "is not a regular file"},
		{huge, "more than the 1048576 netpool reads"},
		{secret, "not a JSON object (syntax error at byte 1; contents not shown)"},
		{secretJSON, "has a field netpool does not know (contents not shown"},
		{secretTyped, "field range is not a string (contents not shown)"},
		{filepath.Join(dir, "missing"), "no such file or directory"},
	}
	h := newHarness(t)
	h.plugin.ReadFile = ReadConfigFile
	f := h.plugin.Funcs()
	for _, tt := range tests {
		t.Run(filepath.Base(tt.path), func(t *testing.T) {
			done := make(chan error, 1)
			start := time.Now()
			go func() {
				done <- h.run(f.Add, "c1", h.conf(`,"range":"10.5.0.0/24","configuration_path":"`+tt.path+`"`, ""))
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("ADD with configuration_path %s hangs", tt.path)
			}
			wantCode(t, err, types.ErrInvalidNetworkConfig, tt.want)
			wantCode(t, err, types.ErrInvalidNetworkConfig, tt.path)
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("the error echoes the file: %v", err)
			}
			if d := time.Since(start); d > FlatConfigReadTimeout+5*time.Second {
				t.Errorf("ADD took %v", d)
			}
		})
	}
	if _, err := ReadConfigFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file = %v, want fs.ErrNotExist so that default paths are skipped", err)
	}
}

// TestLogFileIsRegularOnly: log_file must be a regular file: /dev/zero, a FIFO (which would block
// or fail), a directory and a symbolic link are refused, and the call logs to stderr instead.
func TestLogFileIsRegularOnly(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A reader keeps the FIFO open, so a blocking or non-checking open would succeed.
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	target := filepath.Join(dir, "target")
	link := filepath.Join(dir, "link.log")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/dev/zero", fifo, dir, link} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			h := newHarness(t)
			f := h.plugin.Funcs()
			stdin := h.conf(`,"range":"10.5.0.0/24","log_file":"`+path+`"`, "")
			if err := h.run(f.Add, "c1", stdin); err != nil {
				t.Fatalf("ADD with log_file %s: %v", path, err)
			}
			if !strings.Contains(h.log.String(), "Opening log_file failed") || !strings.Contains(h.log.String(), path) {
				t.Errorf("stderr does not say the log_file was refused: %q", h.log.String())
			}
		})
	}
	if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the link's target was created: %v", err)
	}
}
