// Command cli measures netpoolctl against one envtest kube-apiserver + etcd holding -pools IPPools
// and -reservations reservations (spread evenly), each command a process of its own, as an
// operator runs it, timed from exec to exit:
//
//   - netpoolctl pools (the IPPools with the controller's counts, which the bench writes as the
//     controller does), against kubectl get ippools of the same objects by kubectl of the cluster's
//     version in the same run;
//   - netpoolctl pools --count (the IPPools and every reservation, counted now), against kubectl get
//     ippools,overlappingrangeipreservations: the same objects;
//   - completion of a pool name (netpoolctl __complete show ""), against kubectl's own completion of
//     an IPPool name (kubectl __complete get ippool "").
//
// It prints one table (the median and p90 of -runs runs of each) and exits non-zero when a target is
// missed: pools under -max-pools, completion under -max-complete (medians).
package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/ippool"
	"github.com/netpool/netpool/test/bench/benchenv"
)

type options struct {
	pools, reservations, runs, concurrency int
	maxPools, maxComplete                  time.Duration
	kubectl                                string
}

func main() {
	var o options
	flag.IntVar(&o.pools, "pools", 100, "IPPools")
	flag.IntVar(&o.reservations, "reservations", 20000, "reservations, spread evenly over the pools (at most 250 each)")
	flag.IntVar(&o.runs, "runs", 11, "runs of each command")
	flag.IntVar(&o.concurrency, "concurrency", 64, "requests in flight while loading the cluster")
	flag.DurationVar(&o.maxPools, "max-pools", 300*time.Millisecond, "target: the median of netpoolctl pools")
	flag.DurationVar(&o.maxComplete, "max-complete", 500*time.Millisecond, "target: the median of completing a pool name")
	flag.StringVar(&o.kubectl, "kubectl", "", "kubectl to compare with (default: hack/kubectl-binary.sh, the cluster's version)")
	noFailExit := flag.Bool("no-fail-exit", false, "exit 0 even when a target is missed")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	if o.pools <= 0 || o.reservations < 0 || o.reservations > 250*o.pools || o.runs <= 0 {
		fmt.Fprintln(os.Stderr, "bench: want -pools > 0, 0 <= -reservations <= 250 * -pools, -runs > 0")
		os.Exit(2)
	}
	ok, err := run(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if !ok && !*noFailExit {
		os.Exit(1)
	}
}

func output(cmd *exec.Cmd) (string, error) {
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

func run(ctx context.Context, o options) (bool, error) {
	root, err := benchenv.Root()
	if err != nil {
		return false, err
	}
	dir, err := os.MkdirTemp("", "npclibench")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	if o.kubectl == "" {
		if o.kubectl, err = output(exec.Command("bash", filepath.Join(root, "hack", "kubectl-binary.sh"))); err != nil {
			return false, fmt.Errorf("failed to get kubectl: %w", err)
		}
	}
	netpoolctl := filepath.Join(dir, "netpoolctl")
	build := exec.Command("go", "build", "-trimpath", "-o", netpoolctl, "./cmd/netpoolctl")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return false, fmt.Errorf("failed to build netpoolctl: %w\n%s", err, out)
	}
	plane, err := benchenv.Start(root, benchenv.Options{QPS: 2000, Burst: 4000})
	if err != nil {
		return false, err
	}
	defer plane.Stop()
	c := plane.Client
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	if err := plane.WriteKubeconfig(kubeconfig); err != nil {
		return false, err
	}
	start := time.Now()
	if err := load(ctx, c, o); err != nil {
		return false, err
	}
	fmt.Fprintf(os.Stderr, "bench: %d pools and %d reservations created in %s\n", o.pools, o.reservations, time.Since(start).Round(time.Millisecond))

	kc := "--kubeconfig=" + kubeconfig
	rows := []row{
		{what: "netpoolctl pools", argv: []string{netpoolctl, kc, "pools"}, target: o.maxPools},
		{what: "kubectl get ippools (baseline)", argv: []string{o.kubectl, kc, "get", "ippools"}},
		{what: "netpoolctl pools --count (every reservation)", argv: []string{netpoolctl, kc, "pools", "--count"}},
		{what: "kubectl get ippools,overlappingrangeipreservations (baseline)", argv: []string{o.kubectl, kc, "get", "ippools,overlappingrangeipreservations"}},
		{what: "netpoolctl __complete show \"\" (a pool name)", argv: []string{netpoolctl, kc, "__complete", "show", ""}, target: o.maxComplete},
		{what: "kubectl __complete get ippool \"\" (baseline)", argv: []string{o.kubectl, kc, "__complete", "get", "ippool", ""}},
	}
	// One warm-up run each (the page cache, the API server's first list), then the runs
	// interleaved, so a burst of load on the machine hits every command alike.
	for i := range rows {
		if _, err := rows[i].once(); err != nil {
			return false, err
		}
	}
	for range o.runs {
		for i := range rows {
			d, err := rows[i].once()
			if err != nil {
				return false, err
			}
			rows[i].times = append(rows[i].times, d)
		}
	}
	return print(os.Stdout, o, rows), nil
}

// load creates the pools and the reservations, as the agents would have.
func load(ctx context.Context, c client.Client, o options) error {
	per := (o.reservations + o.pools - 1) / o.pools
	for i := range o.pools {
		p := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: poolName(i)},
			Spec: ipamv1.IPPoolSpec{Range: poolRange(i).String(), NetworkName: "bench"}}
		if err := c.Create(ctx, p); err != nil {
			return err
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, o.concurrency)
	for range o.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := int(next.Add(1)) - 1
				if n >= o.reservations {
					return
				}
				pool := n / per
				addr := poolRange(pool).Addr()
				for range n%per + 1 {
					addr = addr.Next()
				}
				r := &ipamv1.OverlappingRangeIPReservation{
					ObjectMeta: metav1.ObjectMeta{Name: ipamv1.ReservationName("bench", addr),
						Labels: map[string]string{ipamv1.PoolLabel: ipamv1.LabelValue(poolName(pool)), ipamv1.NodeLabel: "node-a"}},
					Spec: ipamv1.OverlappingRangeIPReservationSpec{Address: addr.String(), Pool: poolName(pool), NetworkName: "bench",
						ContainerID: fmt.Sprintf("ctr-%d", n), IfName: "net1", PodRef: fmt.Sprintf("bench/pod-%d", n), PodUID: fmt.Sprintf("uid-%d", n), Node: "node-a"},
				}
				if err := c.Create(ctx, r); err != nil {
					errs <- fmt.Errorf("creating reservation %s: %w", r.Name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	// Each pool's status counts as the controller writes them (its own counting), so netpoolctl
	// pools takes them as it does in a cluster whose controller runs.
	for i := range o.pools {
		var p ipamv1.IPPool
		if err := c.Get(ctx, client.ObjectKey{Name: poolName(i)}, &p); err != nil {
			return err
		}
		held := int64(min(per, o.reservations-i*per))
		capacity, allocated, free := ippool.CountsOf(&p, max(held, 0)).Status()
		p.Status.Capacity, p.Status.Allocated, p.Status.Free = capacity, &allocated, free
		if err := c.Status().Update(ctx, &p); err != nil {
			return err
		}
	}
	return nil
}

func poolName(i int) string { return fmt.Sprintf("bench-%03d", i) }

func poolRange(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(100 + i/256), byte(i % 256), 0}), 24)
}

// row is one command and its run times.
type row struct {
	what   string
	argv   []string
	target time.Duration
	times  []time.Duration
}

func (r *row) once() (time.Duration, error) {
	cmd := exec.Command(r.argv[0], r.argv[1:]...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%s: %w\n%s", strings.Join(r.argv, " "), err, out)
	}
	return d, nil
}

func (r *row) quantile(q float64) time.Duration {
	ts := slices.Clone(r.times)
	slices.Sort(ts)
	return ts[int(q*float64(len(ts)-1)+0.5)]
}

func print(w *os.File, o options, rows []row) bool {
	fmt.Fprintf(w, "netpoolctl against %d IPPools and %d reservations (one envtest API server; each command a process, %d runs)\n",
		o.pools, o.reservations, o.runs)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "command\tmedian\tp90\ttarget\t")
	ok := true
	for _, r := range rows {
		target, verdict := "", ""
		if r.target > 0 {
			target = "< " + r.target.String()
			verdict = "ok"
			if r.quantile(0.5) >= r.target {
				verdict, ok = "MISSED", false
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.what, r.quantile(0.5).Round(time.Millisecond), r.quantile(0.9).Round(time.Millisecond), target, verdict)
	}
	tw.Flush()
	return ok
}
