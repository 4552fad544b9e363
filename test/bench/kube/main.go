// Command kube measures netpool's Kubernetes mode on one envtest kube-apiserver + etcd, in one run:
//
//   - the raw ceiling: Creates of a tiny custom resource (an OverlappingRangeIPReservation) per
//     second from one warm process with -concurrency goroutines;
//   - ADDs as runtimes make them: -adds separate netpool plugin processes, -concurrency at a time,
//     spread over -nodes simulated nodes, each served by its own netpool-agent process (NODENAME
//     set per agent), into one -range pool; throughput, p50/p99 latency, failures and duplicates.
//
// It prints one table and exits non-zero when a target is missed: zero failures and duplicates,
// throughput at least -min-ratio of the ceiling, p99 under -max-p99.
//
// The large scenario (-scenario large, or all, the default) runs on a control plane of its own:
// one agent serves a -large-range pool. It measures -large-adds ADDs (and as many DELs) through
// plugin processes on the empty pool, then fills the pool with -large-count reservations of that
// node and the slices they lie in (created directly, as the agent would have made them), restarts
// the agent so that it caches them all, and measures again. Targets: the ADD latency (p50 and p99)
// stays within 2x of the empty pool's, no object netpool writes reaches 64 KiB, no failure or
// duplicate. It also reports the agent process's memory (VmHWM and VmRSS from /proc).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/netpool/netpool/test/bench/benchenv"
)

type options struct {
	adds        int
	nodes       int
	concurrency int
	ceiling     int
	cidr        string
	minRatio    float64
	maxP99      time.Duration
	binDir      string
	keep        bool

	largeCount       int
	largeRange       string
	largeADDs        int
	largeConcurrency int
}

func main() {
	o := options{}
	flag.IntVar(&o.adds, "adds", 1000, "ADDs, each its own plugin process")
	flag.IntVar(&o.nodes, "nodes", 10, "simulated nodes, one agent process each")
	flag.IntVar(&o.concurrency, "concurrency", 50, "ADDs (and ceiling Creates) in flight at once")
	flag.IntVar(&o.ceiling, "ceiling-creates", 1000, "Creates measured for the raw ceiling")
	flag.StringVar(&o.cidr, "range", "10.200.0.0/20", "the pool's range")
	flag.Float64Var(&o.minRatio, "min-ratio", 0.5, "target: ADD throughput over the raw ceiling")
	flag.DurationVar(&o.maxP99, "max-p99", time.Second, "target: p99 ADD latency")
	flag.StringVar(&o.binDir, "bin", "", "directory holding netpool and netpool-agent (default: build them)")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (agent logs) and print its path")
	flag.IntVar(&o.largeCount, "large-count", 100000, "large scenario: reservations the pool holds")
	flag.StringVar(&o.largeRange, "large-range", "10.64.0.0/15", "large scenario: the pool's range")
	flag.IntVar(&o.largeADDs, "large-adds", 200, "large scenario: ADDs (then DELs) measured on each pool")
	flag.IntVar(&o.largeConcurrency, "large-concurrency", 1, "large scenario: ADDs in flight at once")
	scenario := flag.String("scenario", "all", "what to run: all, throughput or large")
	noFailExit := flag.Bool("no-fail-exit", false, "exit 0 even when a target is missed")
	flag.Parse()
	if *scenario != "all" && *scenario != "throughput" && *scenario != "large" {
		fmt.Fprintf(os.Stderr, "bench: -scenario %q: want all, throughput or large\n", *scenario)
		os.Exit(2)
	}

	ctx, stop := benchenv.Context()
	cleanups = append(cleanups, stop)
	if *scenario == "all" && o.binDir == "" {
		// Both scenarios run the same binaries: build them once.
		dir, err := sharedBinaries()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		cleanups = append(cleanups, func() { _ = os.RemoveAll(dir) })
		o.binDir = dir
	}
	passed := true
	if *scenario != "large" {
		rep, err := run(ctx, o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			exit(1)
		}
		rep.print(os.Stdout, o)
		passed = rep.passed(o)
	}
	if *scenario != "throughput" {
		if *scenario == "all" {
			fmt.Println()
		}
		rep, err := runLarge(ctx, o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: large scenario:", err)
			exit(1)
		}
		rep.print(os.Stdout, o)
		passed = passed && rep.passed(o)
	}
	if !passed && !*noFailExit {
		exit(1)
	}
	exit(0)
}

// cleanups run before the program exits, also through exit.
var cleanups []func()

func exit(code int) {
	for _, f := range cleanups {
		f()
	}
	os.Exit(code)
}

// sharedBinaries builds netpool and netpool-agent into a new temporary directory.
func sharedBinaries() (string, error) {
	root, err := benchenv.Root()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "npbench-bin")
	if err != nil {
		return "", err
	}
	if err := buildBinaries(root, dir); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}
