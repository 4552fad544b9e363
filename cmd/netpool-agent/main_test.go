package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/netpool/netpool/internal/version"
)

// TestVersion: --version prints the stamped version and starts nothing (no node name, no
// kubeconfig, no socket).
func TestVersion(t *testing.T) {
	old := version.Version
	t.Cleanup(func() { version.Version = old })
	version.Version = "v0.9.0-3-gabcdef0"
	var out, errOut bytes.Buffer
	if err := run([]string{"--version"}, &out, &errOut); err != nil {
		t.Fatalf("run(--version) = %v", err)
	}
	if out.String() != "netpool-agent v0.9.0-3-gabcdef0\n" || errOut.Len() != 0 {
		t.Errorf("--version printed %q, stderr %q", out.String(), errOut.String())
	}
}

func TestFlagErrors(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run([]string{"--no-such-flag"}, &out, &errOut); err == nil || !strings.Contains(errOut.String(), "flag provided but not defined: -no-such-flag") {
		t.Errorf("run(--no-such-flag) = %v, stderr %q", err, errOut.String())
	}
	if err := run([]string{"-h"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) || !strings.Contains(errOut.String(), "-version") {
		t.Errorf("run(-h) = %v, stderr %q", err, errOut.String())
	}
	if out.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", out.String())
	}
}

// TestExtraDirFlags: --extra-config-dir and --extra-log-dir repeat, and a bad one stops the agent
// before it touches the API server (the error names the directory).
func TestExtraDirFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run([]string{"--node-name=n", "--kubeconfig=/nonexistent", "--extra-config-dir=/a", "--extra-config-dir=relative"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), `extra directory "relative": want an absolute directory other than /`) {
		t.Errorf("a relative --extra-config-dir: %v", err)
	}
	if err := run([]string{"-h"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) || !strings.Contains(errOut.String(), "-extra-config-dir") ||
		!strings.Contains(errOut.String(), "-extra-log-dir") {
		t.Errorf("-h does not list the extra directory flags: %s", errOut.String())
	}
}
