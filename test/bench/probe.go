package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/netpool/netpool/test/harness"
)

// probePackage is the small program that measures a plugin's peak RSS (see its doc).
const probePackage = "github.com/netpool/netpool/test/bench/rssprobe"

// buildProbe builds the RSS probe into dir and returns its path.
func buildProbe(ctx context.Context, dir string) (string, error) {
	goBin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	out := filepath.Join(dir, "rssprobe")
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, probePackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("failed to build %s: %w\n%s", probePackage, err, b)
	}
	return out, nil
}

// probeReport is what the probe prints.
type probeReport struct {
	MaxRSSKiB int64  `json:"maxRSSKiB"`
	Stdout    string `json:"stdout"`
	Err       string `json:"err,omitempty"`
}

// measureRSS runs bin once with inv through probe and returns its peak RSS in KiB.
func measureRSS(ctx context.Context, probe, bin string, inv harness.Invocation) (int64, error) {
	inv.Path = filepath.Dir(bin)
	cmd := harness.Command(ctx, probe, inv)
	cmd.Args = append(cmd.Args, bin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("RSS probe of %s failed: %w (stderr %q)", bin, err, stderr.Bytes())
	}
	var report probeReport
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		return 0, fmt.Errorf("RSS probe of %s printed %q: %w", bin, stdout.Bytes(), err)
	}
	if report.Err != "" {
		return 0, fmt.Errorf("%s %s under the RSS probe: %s: stdout %q, stderr %q",
			filepath.Base(bin), inv.Command, report.Err, report.Stdout, stderr.Bytes())
	}
	return report.MaxRSSKiB, nil
}
