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
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
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
	noFailExit := flag.Bool("no-fail-exit", false, "exit 0 even when a target is missed")
	flag.Parse()

	ctrllog.SetLogger(logr.Discard()) // controller-runtime's envtest logs nothing the table needs
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	rep.print(os.Stdout, o)
	if !rep.passed(o) && !*noFailExit {
		os.Exit(1)
	}
}
