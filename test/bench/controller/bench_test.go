package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestReleasesReadsTheCounterWithoutDryRuns(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `# HELP netpool_gc_releases_total x
netpool_gc_releases_total{dry_run="false",reason="PodDeleted"} 1000
netpool_gc_releases_total{dry_run="false",reason="PodFinished"} 500
netpool_gc_releases_total{dry_run="true",reason="PodDeleted"} 7
netpool_gc_sweeps_total 3
`)
	}))
	defer srv.Close()
	n, err := releases(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil || n != 1500 {
		t.Fatalf("releases = %d, %v; want 1500", n, err)
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `netpool_gc_releases_total{dry_run="false",reason="PodDeleted"} many`+"\n")
	}))
	defer bad.Close()
	if _, err := releases(strings.TrimPrefix(bad.URL, "http://")); err == nil {
		t.Fatal("a malformed value was accepted")
	}
	if _, err := releases("127.0.0.1:1"); err == nil {
		t.Fatal("an unreachable controller was read")
	}
}

func TestParallelRunsEveryIndexAndReturnsAnError(t *testing.T) {
	var n atomic.Int64
	if err := parallel(context.Background(), 100, 8, func(int) error { n.Add(1); return nil }); err != nil || n.Load() != 100 {
		t.Fatalf("ran %d, %v", n.Load(), err)
	}
	boom := errors.New("boom")
	if err := parallel(context.Background(), 100, 8, func(i int) error {
		if i == 10 {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
}

func TestReportVerdicts(t *testing.T) {
	o := options{pods: 10, maxSweep: 10 * time.Second, maxRSSMiB: 300, deletions: 3}
	good := &report{sweepResult: sweepResult{sweep: 8 * time.Second}, peakRSS: 200 << 20, latencies: []time.Duration{1, 2, 3}}
	if !good.ok(o) {
		t.Fatal("a run within every target failed")
	}
	if good.percentile(0.5) != 2 || good.percentile(0.99) != 3 || good.percentile(1) != 3 || (&report{}).percentile(0.5) != 0 {
		t.Fatal("percentiles")
	}
	for name, r := range map[string]report{
		"slow sweep":                {sweepResult: sweepResult{sweep: 11 * time.Second}, peakRSS: 1},
		"too much RSS":              {sweepResult: sweepResult{sweep: 1}, peakRSS: 301 << 20},
		"a leak left":               {sweepResult: sweepResult{sweep: 1, leaksLeft: 1}, peakRSS: 1},
		"a live release":            {sweepResult: sweepResult{sweep: 1, liveReleased: 1}, peakRSS: 1},
		"a missed one":              {sweepResult: sweepResult{sweep: 1}, peakRSS: 1, latencyMissed: 1},
		"a leak left by a resweep":  {sweepResult: sweepResult{sweep: 1}, peakRSS: 1, resweeps: []sweepResult{{leaksLeft: 1}}},
		"a live release in resweep": {sweepResult: sweepResult{sweep: 1}, peakRSS: 1, resweeps: []sweepResult{{liveReleased: 1}}},
	} {
		if r.ok(o) {
			t.Errorf("%s passed", name)
		}
	}
	var b bytes.Buffer
	(&report{sweepResult: sweepResult{sweep: 11 * time.Second}}).print(&b, o)
	if !strings.Contains(b.String(), "MISSED") || !strings.Contains(b.String(), "full sweep") {
		t.Fatalf("table:\n%s", b.String())
	}
}

func TestValidateOptions(t *testing.T) {
	good := options{pods: 150000, nodes: 5000, cidr: "10.128.0.0/14", deleted: 1000, finished: 500, deletions: 1000}
	if err := good.validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*options){
		"pool too small":      func(o *options) { o.cidr = "10.128.0.0/16" },
		"bad cidr":            func(o *options) { o.cidr = "10.128.0.0" },
		"no nodes":            func(o *options) { o.nodes = 0 },
		"leaks exceed":        func(o *options) { o.deleted = 150000 },
		"negative gc-workers": func(o *options) { o.gcWorkers = -1 },
		"negative qps":        func(o *options) { o.qps = -1 },
		"NaN qps":             func(o *options) { o.qps = math.NaN() },
		"infinite qps":        func(o *options) { o.qps = math.Inf(1) },
	} {
		o := good
		mut(&o)
		if err := o.validate(); err == nil {
			t.Errorf("%s: validated", name)
		}
	}
}

func TestParseSweeps(t *testing.T) {
	got, err := parseSweeps(" 32, 32:2000 ,8:1e3")
	want := []sweepConfig{{workers: 32}, {workers: 32, qps: 2000}, {workers: 8, qps: 1000}}
	if err != nil || len(got) != len(want) {
		t.Fatalf("parseSweeps = %v, %v; want %v", got, err, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("sweep %d = %v, want %v", i, got[i], want[i])
		}
	}
	if got, err := parseSweeps(""); err != nil || got != nil {
		t.Errorf("empty: %v, %v", got, err)
	}
	for _, bad := range []string{"0", "x", "32:", "32:0", "32:-5", "32:NaN", "32:1e9", "32,,8", "-1:100"} {
		if _, err := parseSweeps(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if s := (sweepConfig{workers: 32, qps: 2000}).String(); s != "--gc-workers 32, --kube-api-qps 2000" {
		t.Errorf("String = %q", s)
	}
	if s := (sweepConfig{}).String(); s != "--gc-workers default, --kube-api-qps default" {
		t.Errorf("String of the defaults = %q", s)
	}
}

func TestSweepRate(t *testing.T) {
	if r := (sweepResult{ready: time.Second, sweep: 11 * time.Second}).rate(10); r != 1 {
		t.Errorf("10 releases in 10 s after ready: %g/s", r)
	}
	if r := (sweepResult{ready: time.Second, sweep: time.Second}).rate(10); r != 0 {
		t.Errorf("no time after ready: %g/s", r)
	}
}

func TestPrintListsEachSweep(t *testing.T) {
	o := options{deleted: 8, finished: 2, maxSweep: time.Minute, maxRSSMiB: 300}
	r := &report{sweepResult: sweepResult{ready: time.Second, sweep: 11 * time.Second}, peakRSS: 100 << 20,
		resweeps: []sweepResult{{config: sweepConfig{workers: 32}, ready: time.Second, sweep: 3 * time.Second, peakRSS: 120 << 20}}}
	var b bytes.Buffer
	r.print(&b, o)
	for _, want := range []string{"--gc-workers 32, --kube-api-qps default", "releases/s after ready", "120 MiB"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestJudgeSweep(t *testing.T) {
	names := []string{"leak0", "leak1", "gone2", "live3", "live4"}
	all := map[string]bool{"leak0": true, "leak1": true, "gone2": true, "live3": true, "live4": true}
	for _, tc := range []struct {
		name        string
		present     map[string]bool
		left, freed int
	}{
		{"clean sweep", map[string]bool{"live3": true, "live4": true}, 0, 0},
		{"nothing released", all, 2, 0},
		{"a live one released", map[string]bool{"live4": true}, 0, 1},
		{"the latency phase's own absent or not", map[string]bool{"gone2": true, "live3": true, "live4": true}, 0, 0},
	} {
		left, freed := judgeSweep(names, 2, 1, tc.present)
		if left != tc.left || freed != tc.freed {
			t.Errorf("%s: %d leaks left, %d live released; want %d, %d", tc.name, left, freed, tc.left, tc.freed)
		}
	}
}
