package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/netpool/netpool/test/harness"
)

// options are the bench's counts and places.
type options struct {
	emptyCalls int
	held       int
	heldCalls  int
	fillCalls  int
	fillRange  string
	rssRuns    int
	sizeHeld   int
	sizeCalls  int
	dir        string // "" = a fresh temporary directory, removed afterwards
	binDir     string // "" = harness.BinDir()
}

func defaultOptions() options {
	return options{
		emptyCalls: 300, held: 1000, heldCalls: 300,
		fillCalls: 200, fillRange: "10.20.0.0/16", rssRuns: 5,
		sizeHeld: 25000, sizeCalls: 200,
	}
}

// quick returns o with counts small enough for a run of a few seconds.
func (o options) quick() options {
	o.emptyCalls, o.held, o.heldCalls, o.fillCalls, o.rssRuns, o.sizeCalls = 20, 100, 20, 20, 2, 20
	o.fillRange = "10.20.0.0/20"
	return o
}

// env is what the scenarios share.
type env struct {
	opts   options
	dir    string
	binDir string
	probe  string // the RSS probe; set by run before any scenario
}

func (e *env) netpool() string   { return filepath.Join(e.binDir, "netpool") }
func (e *env) hostLocal() string { return filepath.Join(e.binDir, "host-local") }

// report is what one run measured.
type report struct {
	rows []row
	// probeFloorKiB is the peak RSS the probe reports for /bin/true, the floor of the RSS rows.
	probeFloorKiB int64
}

// run measures every scenario in turn, logging progress to log.
func run(ctx context.Context, opts options, log io.Writer) (report, error) {
	e := &env{opts: opts, dir: opts.dir, binDir: opts.binDir}
	if e.binDir == "" {
		d, err := harness.BinDir()
		if err != nil {
			return report{}, err
		}
		e.binDir = d
		defer func() {
			if err := harness.RemoveBinDir(); err != nil {
				fmt.Fprintln(log, "Removing binaries:", err)
			}
		}()
	}
	if e.dir == "" {
		d, err := os.MkdirTemp("", "netpool-bench-")
		if err != nil {
			return report{}, err
		}
		defer func() {
			_ = os.RemoveAll(d) // best effort: a leftover temporary directory harms nothing
		}()
		e.dir = d
	}

	probe, err := buildProbe(ctx, e.dir)
	if err != nil {
		return report{}, err
	}
	e.probe = probe
	floor, err := probeFloor(ctx, probe)
	if err != nil {
		return report{}, err
	}
	scenarios := []struct {
		name string
		run  func(context.Context, *env) (row, error)
	}{
		{"ADD+DEL on an empty range", benchEmpty},
		{"ADD+DEL with attachments held", benchHeld},
		{"ADD+DEL at 99% and 1% fill", benchFill},
		{"peak RSS on a /8", func(ctx context.Context, e *env) (row, error) { return benchRSS(ctx, e, "/8", "10.0.0.0/8") }},
		{"peak RSS on a /48", func(ctx context.Context, e *env) (row, error) { return benchRSS(ctx, e, "/48", "fd00:10::/48") }},
		{"ADD+DEL on a big store and a small one", benchSize},
	}
	rows := make([]row, 0, len(scenarios))
	for _, s := range scenarios {
		fmt.Fprintf(log, "Measuring %s\n", s.name)
		r, err := s.run(ctx, e)
		if err != nil {
			return report{}, fmt.Errorf("%s: %w", s.name, err)
		}
		rows = append(rows, r)
	}
	return report{rows: rows, probeFloorKiB: floor}, nil
}
