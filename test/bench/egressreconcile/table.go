package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// report is what the bench measured.
type report struct {
	create  time.Duration   // every router created at once to all Available
	changes []time.Duration // each rule change to NAD, Service and pod all following, sorted
}

func (r *report) worstChange() time.Duration {
	if len(r.changes) == 0 {
		return 0
	}
	return r.changes[len(r.changes)-1]
}

// ok reports whether every target is met.
func (r *report) ok(o options) bool {
	return r.create <= o.maxCreate && len(r.changes) == o.changes && r.worstChange() <= o.maxChange
}

func (r *report) print(w io.Writer, o options) {
	verdict := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "MISSED"
	}
	median := time.Duration(0)
	if len(r.changes) > 0 {
		median = r.changes[len(r.changes)/2]
	}
	fmt.Fprintf(w, "netpool EgressRouter reconciler: %d routers, %d rule changes\n", o.routers, o.changes)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "measure\tvalue\ttarget\n")
	fmt.Fprintf(tw, "%d routers created at once: all Available\t%s\t< %s %s\n", o.routers, r.create.Round(time.Millisecond), o.maxCreate, verdict(r.create <= o.maxCreate))
	fmt.Fprintf(tw, "rule change to NAD, pod and Service: p50\t%s\t\n", median.Round(time.Millisecond))
	fmt.Fprintf(tw, "rule change to NAD, pod and Service: max\t%s\t< %s %s\n", r.worstChange().Round(time.Millisecond), o.maxChange, verdict(r.worstChange() <= o.maxChange))
	_ = tw.Flush() // the table is the output; a failed write shows as a missing table
}
