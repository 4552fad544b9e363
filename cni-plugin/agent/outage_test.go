package agent

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/poll"
)

// TestAPIServerRestartDuringARun keeps ADDs running on two nodes while the API server is killed and
// etcd stopped, and both are started again. During the outage every ADD fails with CNI error 11
// within the bound; afterwards the runtime's retries succeed, no address is held twice, nothing is
// left half-made, and DEL reclaims everything. The phases follow the workers, not sleeps: the
// crash comes once every worker has had an ADD succeed, the restart once every worker has had one
// fail with 11, and the run ends once every worker has had one succeed again.
func TestAPIServerRestartDuringARun(t *testing.T) {
	env := envtest.Start(t)
	env.WarmUp(t)
	dir := socketDir(t)
	const bound = 2 * time.Second
	// The agents' logs are shown when the test fails: they tell which path an unbacked answer took.
	logs := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent logs:\n%s", logs.String())
		}
	})
	agentOpts := Options{APITimeout: bound, Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	nodes := []*running{
		MustRun(t, env, "node-a", filepath.Join(dir, "a.sock"), agentOpts),
		MustRun(t, env, "node-b", filepath.Join(dir, "b.sock"), agentOpts),
	}
	extra := `,"range":"10.80.0.0/16"`
	conf := func(n *running) []byte { return netConf("net1", n.socket, extra) }
	// answered is the address each attachment's last successful ADD was given.
	answered := map[string]string{}
	for _, n := range nodes {
		// The pool is created and a block claimed. On a loaded machine the API server may take
		// longer than the bound for that: the ADD then fails with 11, and is retried as a
		// runtime retries it.
		id := "warm-" + n.agent.opts.NodeName
		deadline := time.Now().Add(30 * time.Second)
		out, err := newShim().call("ADD", id, "", conf(n))
		for codeOf(err) == types.ErrTryAgainLater && time.Now().Before(deadline) {
			out, err = newShim().call("ADD", id, "", conf(n))
		}
		if err != nil {
			t.Fatalf("ADD %s: %v", id, err)
		}
		answered[id] = firstIP(t, out)
	}

	const workers = 6
	type result struct {
		node    *running
		worker  int
		id      string
		addr    string // the address a successful ADD was given
		err     error
		start   time.Time
		elapsed time.Duration
	}
	var mu sync.Mutex
	var results []result
	recorded := make(chan struct{}, 1) // a worker recorded a result
	// waitFor waits until every worker has recorded a result that started after since and whose
	// error matches want: the run's phases follow what the workers saw, not the clock.
	waitFor := func(what string, since time.Time, want func(error) bool) {
		t.Helper()
		deadline := time.After(time.Minute)
		for {
			seen := map[int]bool{}
			mu.Lock()
			for _, r := range results {
				if r.start.After(since) && want(r.err) {
					seen[r.worker] = true
				}
			}
			mu.Unlock()
			if len(seen) == workers {
				return
			}
			select {
			case <-recorded:
			case <-deadline:
				t.Fatalf("after a minute only %d of %d workers %s", len(seen), workers, what)
			}
		}
	}
	isSuccess := func(err error) bool { return err == nil }
	isTryAgain := func(err error) bool { return codeOf(err) == types.ErrTryAgainLater }

	lag := startLagProbe(t)
	began := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		n := nodes[w%2]
		wg.Go(func() {
			s := newShim()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				start := time.Now()
				out, err := s.call("ADD", id, "", conf(n))
				addr := ""
				if err == nil {
					addr, err = resultIP(out)
				}
				mu.Lock()
				results = append(results, result{n, w, id, addr, err, start, time.Since(start)})
				mu.Unlock()
				select {
				case recorded <- struct{}{}:
				default:
				}
				if err != nil {
					time.Sleep(50 * time.Millisecond) // as a runtime backs off
				}
			}
		})
	}
	// A failed wait ends the test; the workers stop with it.
	stopWorkers := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopWorkers()
	waitFor("had an ADD succeed before the outage", began, isSuccess)
	crashed := time.Now()
	if err := env.CrashAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := env.StopControlPlane(); err != nil {
		t.Fatal(err)
	}
	// The outage lasts until every worker has had an ADD, started after the crash, fail with 11.
	waitFor("had an ADD fail with code 11 during the outage", crashed, isTryAgain)
	// DEL during the outage fails with 11 too, rather than pretending to have released.
	_, delErr := newShim().call("DEL", "warm-node-a", "", conf(nodes[0]))
	restarted := time.Now()
	if err := env.StartControlPlane(); err != nil {
		t.Fatal(err)
	}
	waitFor("had an ADD succeed after the restart", restarted, isSuccess)
	stopWorkers()
	if codeOf(delErr) != types.ErrTryAgainLater {
		t.Errorf("DEL during the outage = %v, want code 11", delErr)
	}

	var failed []result
	for _, r := range results {
		switch {
		case r.err == nil:
			answered[r.id] = r.addr
		case codeOf(r.err) == types.ErrTryAgainLater:
			failed = append(failed, r)
			// The bound is the agent's; the machine adds what it delays any goroutine of this
			// process, at each of the hops a deadline passes through (the timer, the HTTP
			// transport's cancellation, the agent's answer, the shim's wake-up): at load average 44
			// a 2 s deadline ended its request 2 s late while a sleeping goroutine woke 0.8 s late.
			// A hang would still show: the agent's own bound on a call is 15 s.
			if limit := bound + 1500*time.Millisecond + 4*lag.max(); r.elapsed > limit {
				t.Errorf("ADD %s failed after %v, beyond the %v bound (%v with this machine's timer lag): %v",
					r.id, r.elapsed, bound, limit, r.err)
			}
		default:
			t.Errorf("ADD %s: %v, want success or code 11", r.id, r.err)
		}
	}
	if len(failed) == 0 || len(answered) < 10 {
		t.Fatalf("%d ADDs failed and %d succeeded; the run did not span the outage", len(failed), len(answered))
	}
	t.Logf("%d ADDs succeeded, %d failed with 11 during the outage", len(answered), len(failed))
	// history tells what happened to one attachment, relative to the crash and the restart.
	retried := map[string][]string{}
	history := func(id string) string {
		var b strings.Builder
		for _, r := range results {
			if r.id == id {
				fmt.Fprintf(&b, "first ADD on %s began %v after the crash, took %v: %v; ", r.node.agent.opts.NodeName,
					r.start.Sub(crashed).Round(time.Millisecond), r.elapsed.Round(time.Millisecond), r.err)
			}
		}
		for _, h := range retried[id] {
			b.WriteString(h + "; ")
		}
		fmt.Fprintf(&b, "(restart %v after the crash)", restarted.Sub(crashed).Round(time.Millisecond))
		return b.String()
	}

	// The runtime retries what failed; then every claim of unknown outcome is resolved.
	// A runtime retries on 11 with a backoff; the control plane may still be warming up.
	for _, r := range failed {
		retry := func() (string, error) {
			began := time.Now()
			out, err := newShim().call("ADD", r.id, "", conf(r.node))
			addr := ""
			if err == nil {
				addr, err = resultIP(out)
			}
			retried[r.id] = append(retried[r.id], fmt.Sprintf("retry began %v after the crash: %s %v",
				began.Sub(crashed).Round(time.Millisecond), addr, err))
			return addr, err
		}
		var addr string
		var err error
		poll.Eventually(t, 15*time.Second, "the retried ADD "+r.id+" is answered", func() error {
			if addr, err = retry(); codeOf(err) == types.ErrTryAgainLater {
				return err
			}
			return nil
		})
		if err != nil {
			t.Errorf("retried ADD %s: %v", r.id, err)
			continue
		}
		answered[r.id] = addr
	}
	// The runtime also retries the DEL that got 11. Whether that DEL took effect when the API server
	// came back is not known to the caller (its answer may have been lost), so only the retried DEL
	// settles it: afterwards the attachment holds nothing.
	poll.Eventually(t, 15*time.Second, "the retried DEL warm-node-a is answered", func() error {
		if _, delErr = newShim().call("DEL", "warm-node-a", "", conf(nodes[0])); codeOf(delErr) == types.ErrTryAgainLater {
			return delErr
		}
		return nil
	})
	if delErr != nil {
		t.Errorf("retried DEL warm-node-a: %v", delErr)
	}
	delete(answered, "warm-node-a")
	for _, n := range nodes {
		poll.Eventually(t, 15*time.Second, n.agent.opts.NodeName+" resolves its claims of unknown outcome", func() error {
			if p := n.agent.Store().Pending(); p != 0 {
				return fmt.Errorf("%d left", p)
			}
			return nil
		})
	}
	var list ipamv1.OverlappingRangeIPReservationList
	if err := env.Client.List(context.Background(), &list, client.MatchingLabels{ipamv1.PoolLabel: "10.80.0.0-16"}); err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{}
	for _, r := range list.Items {
		if prev, dup := addrs[r.Spec.Address]; dup {
			t.Errorf("%s held by %s and %s", r.Spec.Address, prev, r.Spec.ContainerID)
		}
		addrs[r.Spec.Address] = r.Spec.ContainerID
		if _, ok := answered[r.Spec.ContainerID]; !ok {
			t.Errorf("reservation %s of %s, whose ADD never succeeded: %s", r.Name, r.Spec.ContainerID, history(r.Spec.ContainerID))
		}
	}
	// Invariant 2: every address an ADD answered is held by a reservation of that attachment.
	for id, addr := range answered {
		if holder, ok := addrs[addr]; !ok || holder != id {
			t.Errorf("ADD %s was answered %s, but no reservation of %s holds it (holder %q): %s", id, addr, id, holder, history(id))
		}
	}
	if len(list.Items) != len(answered) {
		t.Errorf("%d reservations for %d attachments", len(list.Items), len(answered))
	}
	// Everything is reclaimable: DEL on each node releases what it holds.
	for _, r := range list.Items {
		n := nodes[0]
		if r.Spec.Node == "node-b" {
			n = nodes[1]
		}
		if _, err := newShim().call("DEL", r.Spec.ContainerID, "", conf(n)); err != nil {
			t.Errorf("DEL %s: %v", r.Spec.ContainerID, err)
		}
	}
	if err := env.Client.List(context.Background(), &list, client.MatchingLabels{ipamv1.PoolLabel: "10.80.0.0-16"}); err != nil {
		t.Fatal(err)
	}
	for _, r := range list.Items {
		t.Errorf("reservation %s of %s on %s left after DEL of every attachment", r.Name, r.Spec.ContainerID, r.Spec.Node)
	}
}
