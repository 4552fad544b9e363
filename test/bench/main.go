// Command bench compares netpool with host-local, exec'ing each plugin as a runtime does, and
// checks netpool's performance targets: ADD+DEL on an empty range no slower than host-local, at
// least 3x faster with 1000 attachments held, no slower at 99% fill than at 1%, a peak RSS
// under 30 MiB on a /8 and on a /48, and no slower on a 10 MiB store than on a small one. Calls of the two sides alternate, so drift weighs on both.
//
// It prints one table and exits non-zero when a target is missed (unless -no-fail-exit).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
)

func main() {
	os.Exit(benchMain())
}

func benchMain() int {
	opts := defaultOptions()
	flag.IntVar(&opts.emptyCalls, "empty-calls", opts.emptyCalls, "ADD+DEL calls per plugin on the empty /22 (a)")
	flag.IntVar(&opts.held, "held", opts.held, "attachments made before the held comparison (b)")
	flag.IntVar(&opts.heldCalls, "held-calls", opts.heldCalls, "ADD+DEL calls per plugin with attachments held (b)")
	flag.IntVar(&opts.fillCalls, "fill-calls", opts.fillCalls, "ADD+DEL calls per fill level (c)")
	flag.StringVar(&opts.fillRange, "fill-range", opts.fillRange, "range held at 99% and at 1% (c)")
	flag.IntVar(&opts.rssRuns, "rss-runs", opts.rssRuns, "ADDs measured per range for peak RSS (d)")
	flag.IntVar(&opts.sizeHeld, "size-held", opts.sizeHeld, "allocations in the big store (e)")
	flag.IntVar(&opts.sizeCalls, "size-calls", opts.sizeCalls, "ADD+DEL calls per store size (e)")
	flag.StringVar(&opts.dir, "dir", "", "directory for the stores (default: a new temporary directory, removed afterwards)")
	flag.StringVar(&opts.binDir, "bin", "", "directory holding netpool and host-local (default: build them)")
	quick := flag.Bool("quick", false, "small counts, for a quick look (overrides the count flags)")
	noFailExit := flag.Bool("no-fail-exit", false, "exit 0 even when a target is missed")
	flag.Parse()
	if *quick {
		opts = opts.quick()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := run(ctx, opts, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if err := printTable(os.Stdout, rep.rows); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	fmt.Println("\nratio: a, b: netpool/host-local medians; c: 99%/1% medians; d: netpool max / 30 MiB; e: big/small medians.")
	fmt.Printf("Times are per ADD+DEL pair, each process's start-up included. RSS probe floor: %s.\n", mib(rep.probeFloorKiB))
	if failed(rep.rows) && !*noFailExit {
		return 1
	}
	return 0
}
