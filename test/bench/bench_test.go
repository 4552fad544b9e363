package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	s := sample{5, 1, 4, 2, 3, 10, 9, 8, 7, 6} // 1..10, shuffled
	tests := []struct {
		name string
		q    float64
		want time.Duration
	}{
		{"median is the lower middle of an even count", 0.5, 5},
		{"p90 is the 9th of 10", 0.9, 9},
		{"q=1 is the maximum", 1, 10},
		{"a tiny q is the minimum", 0.01, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := quantile(s, tt.q); got != tt.want {
				t.Errorf("quantile(%v, %v) = %v, want %v", s, tt.q, got, tt.want)
			}
		})
	}
	if got := quantile(sample{}, 0.5); got != 0 {
		t.Errorf("quantile of an empty sample = %v, want 0", got)
	}
	if got := ratio(sample{6}, sample{3}); got != 2 {
		t.Errorf("ratio(6, 3) = %v, want 2", got)
	}
}

func TestAlternateFlipsTheOrderEveryRound(t *testing.T) {
	var order []string
	mk := func(name string, d time.Duration) call {
		return func(int) (time.Duration, error) {
			order = append(order, name)
			return d, nil
		}
	}
	sa, sb, err := alternate(3, mk("a", 1), mk("b", 2))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(order, ""), "abbaab"; got != want {
		t.Errorf("call order %q, want %q", got, want)
	}
	for i := range 3 {
		if sa[i] != 1 || sb[i] != 2 {
			t.Errorf("round %d: a=%v b=%v, want each series to keep its own figures (1, 2)", i, sa[i], sb[i])
		}
	}

	boom := errors.New("boom")
	_, _, err = alternate(3, mk("a", 1), func(int) (time.Duration, error) { return 0, boom })
	if !errors.Is(err, boom) {
		t.Errorf("alternate returned %v, want the failing call's error", err)
	}
}

// TestRunMeasuresEveryScenario runs the whole bench with tiny counts: every figure must be a
// plausible positive measurement. Whether the targets are met is for `make bench` to say.
func TestRunMeasuresEveryScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: execs the plugins some hundred times")
	}
	opts := defaultOptions()
	opts.emptyCalls, opts.held, opts.heldCalls, opts.fillCalls, opts.rssRuns, opts.sizeHeld, opts.sizeCalls = 3, 10, 3, 3, 1, 100, 3
	opts.fillRange = "10.20.0.0/24"
	opts.dir = t.TempDir()
	var log bytes.Buffer
	rep, err := run(t.Context(), opts, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.Bytes())
	}
	if len(rep.rows) != 6 {
		t.Fatalf("got %d rows, want 6 (a, b, c, d twice and e)", len(rep.rows))
	}
	if rep.probeFloorKiB < 256 || rep.probeFloorKiB > 64*1024 {
		t.Errorf("RSS probe floor %d KiB, want a plausible process size", rep.probeFloorKiB)
	}
	for _, r := range rep.rows {
		for _, s := range []series{r.left, r.right} {
			lo, hi := 0.1, 10_000.0 // ms per ADD+DEL pair
			if s.unit == "MiB" {
				lo, hi = float64(rep.probeFloorKiB)/1024, 1024
			}
			if s.median < lo || s.median > hi || s.p90 < s.median {
				t.Errorf("%s, %s: median %v %s, p90 %v; want %v <= median <= p90, median <= %v",
					r.name, s.label, s.median, s.unit, s.p90, lo, hi)
			}
		}
		if r.ratio <= 0 || r.target == "" {
			t.Errorf("%s: ratio %v, target %q; want a positive ratio and a target", r.name, r.ratio, r.target)
		}
	}
	var out bytes.Buffer
	if err := printTable(&out, rep.rows); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "\n"); n != 7 {
		t.Errorf("table has %d lines, want a header and 6 rows:\n%s", n, out.String())
	}
}
