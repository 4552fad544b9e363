package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/bench/fanout"
)

// poolName is the IPPool every hollow node allocates from.
const poolName = "scale"

// rolloutHeadroomGiB is the memory left free for the rollout when agents are started: the API
// server's watch cache and etcd grow with every reservation.
const rolloutHeadroomGiB = 4.0

// idleFor is how long the idle phase lasts.
const idleFor = 10 * time.Second

// report is what one run measured.
type report struct {
	nodes    int    // agents that ran (fewer than -nodes when memory ran short)
	shortBy  string // why fewer, if so
	heapBase uint64 // the bench's live heap before the agents
	heapIdle uint64 // with every agent synced, before any ADD
	heapFull uint64 // after the rollout
	upTime   time.Duration
	idle     *phase // nothing happening: the control plane's cost of N connected agents
	raws     []*baseline
	phases   []*phase
	storm    *storm
	verdict  *verdict
	// the real agent process, once the cluster is full
	realRSS, realHWM int64
	realReady        time.Duration // from its start until it served
	realErr          string
	final            snapshot
}

func run(ctx context.Context, o options) (rep *report, err error) {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go guardMemory(ctx, stop, o.minAvailGiB)
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, context.Cause(ctx))
		}
	}()
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
	s, err := newSampler(c)
	if err != nil {
		return nil, err
	}
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: poolName},
		Spec: ipamv1.IPPoolSpec{Range: o.cidr, SliceSize: int32(o.sliceSize)}}
	if err := c.client.Create(ctx, pool); err != nil {
		return nil, fmt.Errorf("failed to create the IPPool: %w", err)
	}
	if err := c.startController(o.statusInterval, o.statusFanout); err != nil {
		return nil, err
	}
	rep = &report{}
	hs, err := nodes(ctx, c, o)
	if err != nil {
		return nil, err
	}
	rep.heapBase = liveHeap()
	began := time.Now()
	for i := 0; i < len(hs); i += o.startParallel {
		if avail := memAvailable(); float64(avail) < (o.minAvailGiB+rolloutHeadroomGiB)*(1<<30) {
			rep.shortBy = fmt.Sprintf("%d of %d agents started: %.1f GiB available, the floor is %.1f GiB and the rollout's %.0f GiB",
				i, len(hs), float64(avail)/(1<<30), o.minAvailGiB, rolloutHeadroomGiB)
			for _, h := range hs[i:] {
				h.stop()
			}
			hs = hs[:i]
			break
		}
		end := min(i+o.startParallel, len(hs))
		if _, _, err := startAll(ctx, hs[i:end], 0, 0); err != nil {
			return rep, err
		}
	}
	defer func() {
		for _, h := range hs {
			h.stop()
		}
	}()
	rep.nodes = len(hs)
	rep.upTime = time.Since(began)
	if len(hs) < 2 {
		return rep, fmt.Errorf("only %d agents could start", len(hs))
	}
	rep.heapIdle = liveHeap()
	rep.idle = &phase{name: fmt.Sprintf("idle: %d agents connected, nothing to do, %s", len(hs), idleFor)}
	err = measure(ctx, s, hs, rep.idle, func(*hollow) bool { return false }, func() error {
		time.Sleep(idleFor)
		return nil
	})
	if err != nil {
		return rep, err
	}
	rep.idle.wall = idleFor + settle

	for _, b := range []struct {
		name, short string
		mk          func(int) client.Object
	}{
		{"raw Create of a tiny unwatched custom resource", "unwatched CR", benchObject},
		{"raw Create of a tiny reservation of no agent's node", "tiny reservation", tinyReservation},
	} {
		raw, err := rawCreates(ctx, c, s, b.name, o.raw, 50, b.mk, nil)
		if err != nil {
			return rep, err
		}
		raw.short = b.short
		rep.raws = append(rep.raws, raw)
	}
	names := make([]string, len(hs))
	for i, h := range hs {
		names[i] = h.node
	}
	watched, err := watchedCreates(ctx, c, s, o.raw, 50, names)
	if err != nil {
		return rep, err
	}
	rep.raws = append(rep.raws, watched)
	if err := cleanRaw(ctx, c); err != nil {
		return rep, err
	}

	r := newRunner(o)
	p, err := r.density(ctx, s, hs, o.density)
	rep.phases = append(rep.phases, p)
	if err != nil {
		return rep, err
	}
	profiled := make(chan error, 1)
	if o.apiProfile != "" {
		go func() { profiled <- s.cpuProfile(ctx, o.apiProfile, 30*time.Second) }()
	} else {
		profiled <- nil
	}
	if p, err = r.rollout(ctx, s, hs, o.pods, o.parallel, o.rate); err != nil {
		return rep, err
	}
	if err := <-profiled; err != nil {
		return rep, err
	}
	rep.phases = append(rep.phases, p)
	rep.heapFull = liveHeap()
	if o.heapProfile != "" {
		if err := writeHeapProfile(o.heapProfile); err != nil {
			return rep, err
		}
	}
	if o.realAgent {
		rep.realRSS, rep.realHWM, rep.realReady, err = realAgent(ctx, c, o, hs[0].node)
		if err != nil {
			rep.realErr = err.Error()
		}
	}
	if o.churn > 0 && o.churnFor > 0 {
		if p, err = r.churn(ctx, s, hs, o.churn, o.churnFor, o.parallel); err != nil {
			return rep, err
		}
		rep.phases = append(rep.phases, p)
	}
	if rep.storm, err = r.storm(ctx, s, hs, o.stormTimeout, o.stormProfile); err != nil {
		return rep, err
	}
	if rep.verdict, err = verify(ctx, c, r.ledger); err != nil {
		return rep, err
	}
	rep.final, err = s.take(ctx)
	return rep, err
}

// nodes writes the Node objects and returns one hollow agent for each, with its credentials.
func nodes(ctx context.Context, c *cluster, o options) ([]*hollow, error) {
	hs := make([]*hollow, o.nodes)
	var mu sync.Mutex
	var first error
	fanout.Each(len(hs), 50, func(i int) {
		name := fmt.Sprintf("node-%05d", i)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
		err := c.client.Create(ctx, n)
		var h *hollow
		if err == nil {
			cfg, cerr := c.agentConfig(ctx, o, name)
			err = cerr
			h = newHollow(name, cfg)
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil && first == nil {
			first = fmt.Errorf("node %s: %w", name, err)
		}
		hs[i] = h
	})
	return hs, first
}

// realAgentWait bounds how long the real agent may take to serve. Its first watch of reservations
// is a consistent read: the API server answers it once its watch cache has caught up with etcd, and
// after a rollout at 5,000 watchers on this machine's 2 cores that cache ran minutes behind.
const realAgentWait = 10 * time.Minute

// realAgent runs one netpool-agent process for node, with the identity node's hollow agent has,
// against the full cluster and returns its resident memory once it serves (and its peak) and how
// long it took to serve, then stops it. One that does not serve within realAgentWait writes its
// goroutines to its log (SIGQUIT), which the error names.
func realAgent(ctx context.Context, c *cluster, o options, node string) (rss, hwm int64, ready time.Duration, err error) {
	socket := filepath.Join(c.dir, "real.sock")
	kubeconfig, err := c.agentKubeconfig(ctx, o, node)
	if err != nil {
		return 0, 0, 0, err
	}
	cmd := exec.CommandContext(ctx, c.agentBin, "--kubeconfig", kubeconfig, "--socket", socket, "--node-name", node,
		"--metrics-bind-address", "", "--log-level", "debug")
	log, err := os.Create(filepath.Join(c.dir, "real-agent.log"))
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() { _ = log.Close() }() // the agent's log, kept for -keep
	cmd.Stdout, cmd.Stderr = log, log
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	for {
		if conn, err := net.Dial("unix", socket); err == nil {
			_ = conn.Close()
			break
		}
		select {
		case err := <-done:
			done <- err
			return 0, 0, 0, fmt.Errorf("the real agent exited: %v (log %s)", err, log.Name())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Since(start) > realAgentWait {
			_ = cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, to its log
			select {
			case err := <-done:
				done <- err // for the deferred stop, which then has nothing to stop
			case <-time.After(10 * time.Second):
			}
			return 0, 0, 0, fmt.Errorf("the real agent did not serve within %s (its goroutines: %s)", realAgentWait, log.Name())
		}
	}
	ready = time.Since(start)
	time.Sleep(2 * time.Second) // settled: its watches are open and idle
	p := readProc(cmd.Process.Pid)
	return p.RSS, p.HWM, ready, nil
}

// writeHeapProfile writes the bench's heap profile to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// guardMemory ends the run when the machine's available memory falls below floorGiB: the machine
// is shared, and a run that would take the others' memory stops instead (the tables then show how
// far it got).
func guardMemory(ctx context.Context, stop context.CancelCauseFunc, floorGiB float64) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if avail := memAvailable(); avail > 0 && float64(avail) < floorGiB*(1<<30) {
				stop(fmt.Errorf("stopped: %.1f GiB of memory available, below %.1f GiB", float64(avail)/(1<<30), floorGiB))
				return
			}
		}
	}
}
