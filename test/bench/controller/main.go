// Command controller measures the netpool controller on one envtest kube-apiserver + etcd:
//
//   - the full sweep: -pods pods (Running, their address in network-status) and one reservation
//     each; before the controller starts, -deleted of the pods are deleted and -finished have
//     Succeeded, as if it had been down. The controller binary is then started cold: the time until
//     it is ready (caches synced) and until every leaked reservation is released, and that no live
//     reservation was;
//   - release latency: -deletions pods deleted at -rate per minute while it runs: the time from
//     each pod's deletion to its reservation's, p50/p99/max;
//   - the controller's peak memory (VmHWM of its process) over both.
//
// It prints one table and exits non-zero when a target is missed: the sweep under -max-sweep, the
// peak memory under -max-rss-mib, no live reservation released.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/netpool/netpool/test/bench/benchenv"
	"github.com/netpool/netpool/test/bench/benchproc"
)

// options are the bench's flags.
type options struct {
	pods        int
	nodes       int
	cidr        string
	deleted     int
	finished    int
	deletions   int
	rate        int
	concurrency int
	grace       time.Duration
	gcWorkers   int
	qps         float64
	resweeps    []sweepConfig
	maxSweep    time.Duration
	maxRSSMiB   int
	binDir      string
	keep        bool
}

func main() {
	o := options{}
	flag.IntVar(&o.pods, "pods", 20000, "pods, each with one reservation")
	flag.IntVar(&o.nodes, "nodes", 100, "nodes the pods and reservations are spread over")
	flag.StringVar(&o.cidr, "cidr", "10.128.0.0/16", "range of the pool (at least -pods addresses)")
	flag.IntVar(&o.deleted, "deleted", 1000, "pods deleted while the controller is down (leaks the sweep releases)")
	flag.IntVar(&o.finished, "finished", 500, "pods that Succeeded while the controller is down (leaks too)")
	flag.IntVar(&o.deletions, "deletions", 1000, "pods deleted while the controller runs, for the release latency")
	flag.IntVar(&o.rate, "rate", 1000, "deletions per minute")
	flag.IntVar(&o.concurrency, "concurrency", 64, "requests in flight while loading the cluster")
	flag.IntVar(&o.gcWorkers, "gc-workers", 0, "the controller's --gc-workers (0: its default)")
	flag.Float64Var(&o.qps, "kube-api-qps", 0, "the controller's --kube-api-qps, its --kube-api-burst twice that (0: its defaults)")
	resweeps := flag.String("resweep", "", "after the measurements, sweep the same leaks again with each of these controller settings, "+
		"comma-separated WORKERS[:QPS] (e.g. 32,32:2000): the leaks are recreated and the controller restarted cold for each")
	flag.DurationVar(&o.grace, "gc-grace", 5*time.Second, "the controller's --gc-grace (the load waits it out)")
	flag.DurationVar(&o.maxSweep, "max-sweep", 10*time.Second, "target: controller start to every leak released")
	flag.IntVar(&o.maxRSSMiB, "max-rss-mib", 300, "target: the controller's peak resident memory")
	flag.StringVar(&o.binDir, "bin", "", "directory holding netpool-controller (default: build it)")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (the controller's log) and print its path")
	noFailExit := flag.Bool("no-fail-exit", false, "exit 0 even when a target is missed")
	flag.Parse()
	var err error
	if o.resweeps, err = parseSweeps(*resweeps); err != nil {
		fmt.Fprintln(os.Stderr, "bench: -resweep:", err)
		os.Exit(2)
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}

	ctx, stop := benchenv.Context()
	defer stop()
	rep, err := run(ctx, o)
	if rep != nil {
		rep.print(os.Stdout, o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if !rep.ok(o) && !*noFailExit {
		os.Exit(1)
	}
}

// validate checks that the flags describe a workload the pool can hold.
func (o options) validate() error {
	if o.deleted+o.finished+o.deletions > o.pods {
		return fmt.Errorf("-deleted + -finished + -deletions exceed -pods")
	}
	if o.gcWorkers < 0 {
		return fmt.Errorf("-gc-workers %d: 0 (the controller's default) or more", o.gcWorkers)
	}
	if !(o.qps >= 0) || o.qps > 1e6 { // NaN fails the first test
		return fmt.Errorf("-kube-api-qps %g: 0 (the controller's default) to 1e6", o.qps)
	}
	if o.nodes < 1 || o.nodes > 9999 {
		return fmt.Errorf("-nodes %d: 1 to 9999", o.nodes)
	}
	p, err := netip.ParsePrefix(o.cidr)
	if err != nil {
		return fmt.Errorf("-cidr %q: %w", o.cidr, err)
	}
	if host := p.Addr().BitLen() - p.Bits(); host < 63 && 1<<host < o.pods+2 {
		return fmt.Errorf("-cidr %s holds fewer than -pods %d addresses", o.cidr, o.pods)
	}
	return nil
}

// run sets the cluster up, runs both measurements and tears everything down.
func run(ctx context.Context, o options) (*report, error) {
	c, err := startCluster(o)
	if c != nil {
		defer func() {
			if err := c.stop(o.keep); err != nil {
				fmt.Fprintln(os.Stderr, "bench: stopping:", err)
			}
		}()
	}
	if err != nil {
		return nil, err
	}
	rep := &report{}
	w, err := load(ctx, c, o, rep)
	if err != nil {
		return nil, err
	}
	rep.config = sweepConfig{o.gcWorkers, o.qps}
	if err := measureSweep(ctx, c, o, w, &rep.sweepResult); err != nil {
		return nil, err
	}
	if err := measureLatency(ctx, c, o, w, rep); err != nil {
		return nil, err
	}
	p, err := benchproc.ReadProc(c.controller.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	rep.peakRSS = p.HWM
	for _, sc := range o.resweeps {
		rs, err := resweep(ctx, c, o, w, sc)
		if err != nil {
			return rep, err
		}
		rep.resweeps = append(rep.resweeps, rs)
	}
	return rep, nil
}
