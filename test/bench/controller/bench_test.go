package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	good := &report{sweep: 8 * time.Second, peakRSS: 200 << 20, latencies: []time.Duration{1, 2, 3}}
	if !good.ok(o) {
		t.Fatal("a run within every target failed")
	}
	if good.percentile(0.5) != 2 || good.percentile(0.99) != 3 || good.percentile(1) != 3 || (&report{}).percentile(0.5) != 0 {
		t.Fatal("percentiles")
	}
	for name, r := range map[string]report{
		"slow sweep":     {sweep: 11 * time.Second, peakRSS: 1},
		"too much RSS":   {sweep: 1, peakRSS: 301 << 20},
		"a leak left":    {sweep: 1, peakRSS: 1, leaksLeft: 1},
		"a live release": {sweep: 1, peakRSS: 1, liveReleased: 1},
		"a missed one":   {sweep: 1, peakRSS: 1, latencyMissed: 1},
	} {
		if r.ok(o) {
			t.Errorf("%s passed", name)
		}
	}
	var b bytes.Buffer
	(&report{sweep: 11 * time.Second}).print(&b, o)
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
	} {
		o := good
		mut(&o)
		if err := o.validate(); err == nil {
			t.Errorf("%s: validated", name)
		}
	}
}
