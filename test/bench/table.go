package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// series is one side of a row: what was measured, its median and p90, and their unit.
type series struct {
	label       string
	median, p90 float64
	unit        string // "ms" or "MiB"
}

// timeSeries summarises a sample of call times in milliseconds.
func timeSeries(label string, s sample) series {
	return series{label: label, median: millis(s.median()), p90: millis(s.p90()), unit: "ms"}
}

// rssSeries summarises peak RSS figures (KiB) in MiB.
func rssSeries(label string, kib []int64) series {
	return series{label: label, median: float64(quantile(kib, 0.5)) / 1024, p90: float64(quantile(kib, 0.9)) / 1024, unit: "MiB"}
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (s series) format(v float64) string {
	if s.unit == "MiB" {
		return fmt.Sprintf("%.1f MiB", v)
	}
	return fmt.Sprintf("%.2f %s", v, s.unit)
}

// row is one line of the comparison table.
type row struct {
	name        string
	left, right series
	ratio       float64
	target      string
	pass        bool
}

func (r row) result() string {
	if r.pass {
		return "PASS"
	}
	return "FAIL"
}

// printTable writes the rows side by side, one scenario a line.
func printTable(w io.Writer, rows []row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tleft\tmedian\tp90\tright\tmedian\tp90\tratio\ttarget\tresult")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%s\n", r.name,
			r.left.label, r.left.format(r.left.median), r.left.format(r.left.p90),
			r.right.label, r.right.format(r.right.median), r.right.format(r.right.p90),
			r.ratio, r.target, r.result())
	}
	return tw.Flush()
}

// failed reports whether any row missed its target.
func failed(rows []row) bool {
	for _, r := range rows {
		if !r.pass {
			return true
		}
	}
	return false
}

// mib formats a KiB figure.
func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }
