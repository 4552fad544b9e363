// Command scale simulates a cluster of -nodes nodes on one machine: one process of hollow agents
// (each the real agent store with its own HTTP client, cache and watches, serving ADD and DEL
// through the agent's real request handler, in-process) against one real kube-apiserver + etcd
// (envtest) and the real controller. Node objects are written directly; there are no kubelets and
// no node leases. With -policy (the default) every agent authenticates with a token of the agent's
// ServiceAccount bound to a pod on its node, so the node-isolation policy of deploy/base runs on
// every write, as in a cluster, and (with -flowcontrol, the default) API priority and fairness puts
// the agents' requests in the priority level deploy/base gives them.
//
// Workloads, each a phase measured between two snapshots of the API server's and etcd's metrics and
// CPU and of every agent's request and watch counters:
//
//   - density: one node does -density ADDs at once while the others idle;
//   - rollout: every node does -pods ADDs, interleaved, at most -parallel in flight (and -rate per
//     second when set);
//   - churn: -churn ADD+DEL pairs per second on random nodes for -churn-for;
//   - restart storm: every agent stops and all start again at once.
//
// In the same run, the raw Create of a tiny custom resource that no agent watches is the baseline
// of the API server's and etcd's CPU per ADD. The run ends with a LIST of every reservation,
// checked against what the ADDs returned and the DELs removed: no address held twice, none lost.
//
// It prints the tables and exits non-zero when a target is missed (see targets in table.go).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/netpool/netpool/test/bench/benchenv"
)

// options are the bench's flags.
type options struct {
	nodes          int
	pods           int
	density        int
	parallel       int
	rate           float64
	churn          float64
	churnFor       time.Duration
	cidr           string
	sliceSize      int
	policy         bool
	flowcontrol    bool
	statusInterval time.Duration
	statusFanout   float64
	raw            int
	startParallel  int
	stormTimeout   time.Duration
	minAvailGiB    float64
	realAgent      bool
	heapProfile    string
	apiProfile     string
	stormProfile   string
	binDir         string
	keep           bool
	targets        bool
}

func main() {
	o := options{}
	flag.IntVar(&o.nodes, "nodes", 100, "hollow nodes (agents)")
	flag.IntVar(&o.pods, "pods", 30, "ADDs per node in the rollout")
	flag.IntVar(&o.density, "density", 110, "ADDs of the one node of the density phase")
	flag.IntVar(&o.parallel, "parallel", 32, "ADDs in flight at once in the rollout and the churn, over all nodes (as many kubelets starting pods at once)")
	flag.Float64Var(&o.rate, "rate", 0, "rollout ADDs started per second over all nodes (0: as fast as -parallel allows)")
	flag.Float64Var(&o.churn, "churn", 20, "ADD+DEL pairs per second in the churn phase")
	flag.DurationVar(&o.churnFor, "churn-for", 15*time.Second, "length of the churn phase")
	flag.StringVar(&o.cidr, "cidr", "10.64.0.0/12", "range of the IPPool every node allocates from")
	flag.IntVar(&o.sliceSize, "slice-size", 0, "the IPPool's sliceSize (0: the default, 64 addresses a block for a wide range)")
	flag.BoolVar(&o.policy, "policy", true, "agents use pod-bound ServiceAccount tokens under deploy/base's RBAC and node-isolation policy (else the admin)")
	flag.BoolVar(&o.flowcontrol, "flowcontrol", true, "with -policy, the agents' priority level of deploy/base/agent-flowcontrol.yaml (else the API server's default levels)")
	flag.DurationVar(&o.statusInterval, "pool-status-interval", time.Second, "the controller's --pool-status-interval")
	flag.Float64Var(&o.statusFanout, "pool-status-fanout", -1, "the controller's --pool-status-fanout (-1: its default)")
	flag.IntVar(&o.raw, "raw", 2000, "raw Creates of each baseline")
	flag.IntVar(&o.startParallel, "start-parallel", 50, "agents starting at once when the cluster is brought up (the restart storm starts all at once)")
	flag.DurationVar(&o.stormTimeout, "storm-timeout", 10*time.Minute, "how long each agent of the restart storm may take to be ready before it counts as failed")
	flag.Float64Var(&o.minAvailGiB, "min-available-gib", 6, "end the run when the machine's available memory falls below this (and start no more agents than leave 4 GiB more for the rollout)")
	flag.BoolVar(&o.realAgent, "real-agent", true, "also start one real netpool-agent process (with the first node's identity) once the cluster is full, for its resident memory")
	flag.StringVar(&o.heapProfile, "heap-profile", "", "write the bench's heap profile after the rollout to this file")
	flag.StringVar(&o.apiProfile, "apiserver-profile", "", "write a 30 s CPU profile of the API server during the rollout to this file")
	flag.StringVar(&o.stormProfile, "storm-profile", "", "write a 20 s CPU profile of the API server from the restart storm's start to this file")
	flag.StringVar(&o.binDir, "bin", "", "directory holding netpool-controller and netpool-agent (default: build them)")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (the controller's log)")
	flag.BoolVar(&o.targets, "targets", true, "judge the targets (exit 1 on a miss)")
	noFailExit := flag.Bool("no-fail-exit", false, "exit 0 even when a target is missed")
	flag.Parse()
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := benchenv.Context()
	klog.SetLogger(logr.Discard()) // client-go's complaints about slow answers; the tables count them
	defer stop()
	rep, err := run(ctx, o)
	if rep != nil {
		rep.print(os.Stdout, o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if o.targets && !rep.ok(o) && !*noFailExit {
		os.Exit(1)
	}
}

func (o options) validate() error {
	switch {
	case o.nodes < 2:
		return fmt.Errorf("-nodes %d: at least 2 (one busy, the others idle)", o.nodes)
	case o.nodes > 99999:
		return fmt.Errorf("-nodes %d: at most 99999", o.nodes)
	case o.pods < 1 || o.density < 1:
		return fmt.Errorf("-pods %d and -density %d must be positive", o.pods, o.density)
	case o.parallel < 1:
		return fmt.Errorf("-parallel %d must be positive", o.parallel)
	case o.rate < 0 || o.churn < 0:
		return fmt.Errorf("-rate %g and -churn %g must not be negative", o.rate, o.churn)
	case o.raw < 1 || o.raw > 60000:
		return fmt.Errorf("-raw %d: 1 to 60000", o.raw)
	case o.statusInterval <= 0:
		return fmt.Errorf("-pool-status-interval %s must be positive", o.statusInterval)
	case !(o.statusFanout >= -1) || o.statusFanout > 1e9:
		return fmt.Errorf("-pool-status-fanout %g: -1 (the controller's default), 0 (unbounded) or a rate", o.statusFanout)
	}
	return nil
}
