// Command egressreconcile measures the EgressRouter reconciler on one envtest kube-apiserver + etcd, with
// the controller's manager running in this process and the bench playing the kubelet and Multus
// (it marks each router pod Ready and writes the network-status that shows its address on net1):
//
//   - create: -routers routers created at once, until every one is Available;
//   - update: -changes rule changes, one after another, each until the NAD config, the Service's
//     ports and a pod of the new config have all followed it.
//
// It prints one table with each figure beside its target and exits non-zero when one is missed.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/netpool/netpool/test/bench/benchenv"
)

// options are the bench's flags.
type options struct {
	routers     int
	changes     int
	concurrency int
	maxCreate   time.Duration
	maxChange   time.Duration
}

func main() {
	o := options{}
	flag.IntVar(&o.routers, "routers", 100, "routers created at once")
	flag.IntVar(&o.changes, "changes", 20, "rule changes, one after another")
	flag.IntVar(&o.concurrency, "concurrency", 32, "requests in flight while creating routers and playing the kubelet")
	flag.DurationVar(&o.maxCreate, "max-create", 30*time.Second, "target: every router Available after they are created at once")
	flag.DurationVar(&o.maxChange, "max-change", 2*time.Second, "target: a rule change reaches the NAD, the pod and the Service")
	noFailExit := flag.Bool("no-fail-exit", false, "exit 0 even when a target is missed")
	flag.Parse()
	if o.routers < 1 || o.changes < 1 || o.concurrency < 1 || o.changes > o.routers {
		fmt.Fprintln(os.Stderr, "bench: -routers, -changes and -concurrency must be positive, and -changes at most -routers")
		os.Exit(2)
	}
	ctx, stop := benchenv.Context()
	defer stop()
	rep, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	rep.print(os.Stdout, o)
	if !rep.ok(o) && !*noFailExit {
		os.Exit(1)
	}
}
