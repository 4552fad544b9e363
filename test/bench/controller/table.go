package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// report is what the bench measured.
type report struct {
	loadTime time.Duration
	sweepResult
	// resweeps are the sweeps of -resweep, after the measurements.
	resweeps      []sweepResult
	latencies     []time.Duration
	latencyMissed int
	deletionRate  int
	peakRSS       int64
}

// sweepResult is one cold start of the controller with the leaks waiting.
type sweepResult struct {
	config       sweepConfig
	ready        time.Duration // controller start to caches synced
	sweep        time.Duration // controller start to every leak released
	leaksLeft    int           // leaks still there after the sweep
	liveReleased int           // live reservations the sweep released (must be 0)
	peakRSS      int64         // of the controller, a resweep's (the first sweep's is the report's)
}

// ok reports whether every target is met.
func (r *report) ok(o options) bool {
	for _, s := range r.resweeps {
		if s.leaksLeft != 0 || s.liveReleased != 0 {
			return false
		}
	}
	return r.sweep <= o.maxSweep && r.peakRSS <= int64(o.maxRSSMiB)<<20 && r.leaksLeft == 0 && r.liveReleased == 0 && r.latencyMissed == 0
}

// percentile returns the p-th percentile of the sorted latencies.
func (r *report) percentile(p float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	i := int(p*float64(len(r.latencies))+0.5) - 1
	return r.latencies[min(max(i, 0), len(r.latencies)-1)]
}

func (r *report) print(w io.Writer, o options) {
	verdict := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "MISSED"
	}
	fmt.Fprintf(w, "netpool controller: %d pods, %d reservations, %d leaked (%d pods deleted, %d finished)\n",
		o.pods, o.pods, o.deleted+o.finished, o.deleted, o.finished)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "measure\tvalue\ttarget\n")
	fmt.Fprintf(tw, "load (pods, reservations, leaks)\t%s\t\n", r.loadTime.Round(time.Millisecond))
	fmt.Fprintf(tw, "start to ready (caches synced)\t%s\t\n", r.ready.Round(time.Millisecond))
	fmt.Fprintf(tw, "start to every leak released (full sweep)\t%s\t< %s %s\n", r.sweep.Round(time.Millisecond), o.maxSweep, verdict(r.sweep <= o.maxSweep))
	fmt.Fprintf(tw, "sweep after ready\t%s\t\n", (r.sweep - r.ready).Round(time.Millisecond))
	fmt.Fprintf(tw, "leaks left / live reservations released\t%d / %d\t0 / 0 %s\n", r.leaksLeft, r.liveReleased, verdict(r.leaksLeft == 0 && r.liveReleased == 0))
	fmt.Fprintf(tw, "release latency at %d deletions/min: p50\t%s\t\n", r.deletionRate, r.percentile(0.50).Round(time.Millisecond))
	fmt.Fprintf(tw, "release latency: p99\t%s\t\n", r.percentile(0.99).Round(time.Millisecond))
	fmt.Fprintf(tw, "release latency: max\t%s\t\n", r.percentile(1).Round(time.Millisecond))
	fmt.Fprintf(tw, "deletions not released in time\t%d of %d\t0 %s\n", r.latencyMissed, o.deletions, verdict(r.latencyMissed == 0))
	fmt.Fprintf(tw, "controller peak memory (VmHWM)\t%.1f MiB\t< %d MiB %s\n", float64(r.peakRSS)/(1<<20), o.maxRSSMiB, verdict(r.peakRSS <= int64(o.maxRSSMiB)<<20))
	_ = tw.Flush() // the table is the output; a failed write shows as a missing table
	if len(r.resweeps) == 0 {
		return
	}
	leaked := o.deleted + o.finished
	fmt.Fprintf(w, "\nthe same %d leaks recreated, the controller restarted cold for each sweep (the first: %s)\n", leaked, sweepConfig{o.gcWorkers, o.qps})
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "controller\tready\tfull sweep\tafter ready\treleases/s after ready\tleaks left / live released\tpeak memory\n")
	first := r.sweepResult
	first.peakRSS = r.peakRSS
	for _, s := range append([]sweepResult{first}, r.resweeps...) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f\t%d / %d %s\t%.0f MiB\n", s.config, s.ready.Round(time.Millisecond), s.sweep.Round(time.Millisecond),
			(s.sweep - s.ready).Round(time.Millisecond), s.rate(leaked), s.leaksLeft, s.liveReleased, verdict(s.leaksLeft == 0 && s.liveReleased == 0),
			float64(s.peakRSS)/(1<<20))
	}
	_ = tw.Flush()
}

// rate is the releases per second after the controller was ready.
func (s sweepResult) rate(leaked int) float64 {
	if d := (s.sweep - s.ready).Seconds(); d > 0 {
		return float64(leaked) / d
	}
	return 0
}
