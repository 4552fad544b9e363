package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/harness"
	"github.com/netpool/netpool/test/poll"
)

// TestKubernetesPoolExhaustedAtCapacity fills a six-address inline range from two nodes (three
// pods each, through bridge in real namespaces): all six get distinct addresses, a seventh ADD on
// either node fails with netpool's code 100 and says the pool is exhausted, and after one DEL the
// seventh succeeds.
func TestKubernetesPoolExhaustedAtCapacity(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ctx := testContext(t)
	env := envtest.Shared(t)

	const (
		network = "e2e-kube-full"
		subnet  = "10.91.0.0/24"
		pool    = "10.91.0.0-24"
	)
	first, last := netip.MustParseAddr("10.91.0.10"), netip.MustParseAddr("10.91.0.15")
	fields := map[string]any{"range": subnet, "range_start": first.String(), "range_end": last.String(), "gateway": "10.91.0.1"}
	nodes := twoNodes(t, env, network, "np-kf", fields)

	type pod struct {
		node int
		rt   *libcni.RuntimeConf
		ns   ns.NetNS
	}
	var pods []pod
	seen := map[netip.Addr]string{}
	for i := range 6 {
		node := i % 2
		n := mustNetNS(t)
		id := fmt.Sprintf("full-%d", i)
		rt := podAttachment(id, n, "eth0", "e2e", "pod-"+id)
		ips := resultIPs(t, mustAdd(ctx, t, nodes[node], rt))
		if len(ips) != 1 {
			t.Fatalf("ADD %s got %v, want one address", id, ips)
		}
		assertAddr(t, ips[0], first, last, 24)
		if prev, dup := seen[ips[0].Addr()]; dup {
			t.Fatalf("%s got %s, already held by %s", id, ips[0].Addr(), prev)
		}
		seen[ips[0].Addr()] = id
		assertKernelAddrs(t, n, "eth0", ips)
		pods = append(pods, pod{node, rt, n})
	}
	if held := reservations(t, env, pool); len(held) != 6 {
		t.Fatalf("reservations = %v, want the six pods", keys(held))
	}

	// The range is full: the seventh fails on both nodes, with code 100 and a message that says so.
	nsX := mustNetNS(t)
	seventh := podAttachment("full-7", nsX, "eth0", "e2e", "pod-full-7")
	for i, n := range nodes {
		res, err := n.Add(ctx, seventh)
		if err == nil {
			t.Fatalf("seventh ADD on node %d got %v, want code 100: the six addresses are taken", i, res.IPs)
		}
		if code := harness.CNIErrorCode(err); code != 100 || !strings.Contains(err.Error(), "exhausted") {
			t.Fatalf("seventh ADD on node %d: code %d: %v; want code 100 saying the pool is exhausted", i, code, err)
		}
		t.Logf("seventh ADD on node %d failed as expected: %v", i, err)
		mustDel(ctx, t, n, seventh) // as a runtime does after a failed ADD
	}
	if held := reservations(t, env, pool); len(held) != 6 {
		t.Fatalf("reservations after the failed ADDs = %v, want the six pods", keys(held))
	}

	// One DEL frees one address; the seventh then gets exactly that one.
	freed := pods[1]
	var freedAddr netip.Addr
	for a, id := range seen {
		if id == freed.rt.ContainerID {
			freedAddr = a
		}
	}
	mustDel(ctx, t, nodes[freed.node], freed.rt)
	ips := resultIPs(t, mustAdd(ctx, t, nodes[freed.node], seventh))
	if len(ips) != 1 || ips[0] != netip.PrefixFrom(freedAddr, 24) {
		t.Fatalf("seventh ADD after DEL of %s got %v, want %s/24", freed.rt.ContainerID, ips, freedAddr)
	}
	assertKernelAddrs(t, nsX, "eth0", ips)
	mustCheck(ctx, t, nodes[freed.node], seventh)

	mustDel(ctx, t, nodes[freed.node], seventh)
	for i, p := range pods {
		if i != 1 {
			mustDel(ctx, t, nodes[p.node], p.rt)
		}
	}
	if left := reservations(t, env, pool); len(left) != 0 {
		t.Errorf("reservations after DEL of every attachment: %v", keys(left))
	}
}

// TestKubernetesOverlappingPoolsShareNoAddress attaches pods to two networks (different CNI
// names, one network_name) whose ranges overlap, a /24 and the /25 at its start, on two nodes:
// with enable_overlapping_ranges at its default, no address is given twice across both networks,
// as the kernel shows inside the namespaces.
func TestKubernetesOverlappingPoolsShareNoAddress(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ctx := testContext(t)
	env := envtest.Shared(t)

	wide, narrow := netip.MustParsePrefix("10.92.0.0/24"), netip.MustParsePrefix("10.92.0.0/25")
	sockA, sockB := mustAgent(t, env, "node-a"), mustAgent(t, env, "node-b")
	hostA, hostB := mustNetNS(t), mustNetNS(t)
	type net struct {
		name   string
		subnet netip.Prefix
		nodes  []*harness.Network
	}
	var nets []net
	for i, subnet := range []netip.Prefix{wide, narrow} {
		name := fmt.Sprintf("e2e-kube-ov%d", i)
		fields := map[string]any{"range": subnet.String(), "gateway": "10.92.0.1", "network_name": "e2e-shared"}
		nets = append(nets, net{name, subnet, []*harness.Network{
			mustNetwork(t, hostA, kubeConflist(t, name, fmt.Sprintf("np-ov%da", i), sockA, fields), nil),
			mustNetwork(t, hostB, kubeConflist(t, name, fmt.Sprintf("np-ov%db", i), sockB, fields), nil),
		}})
	}

	type att struct {
		net, node int
		rt        *libcni.RuntimeConf
	}
	var atts []att
	held := map[netip.Addr]string{}
	for round := range 5 {
		for ni, nw := range nets {
			for node := range 2 {
				n := mustNetNS(t)
				id := fmt.Sprintf("ov%d-%d-%d", ni, node, round)
				rt := podAttachment(id, n, "eth0", "e2e", "pod-"+id)
				ips := resultIPs(t, mustAdd(ctx, t, nw.nodes[node], rt))
				if len(ips) != 1 || !nw.subnet.Contains(ips[0].Addr()) || ips[0].Bits() != nw.subnet.Bits() {
					t.Fatalf("ADD %s on %s got %v, want one address of %s", id, nw.name, ips, nw.subnet)
				}
				kernel, err := harness.WaitAddrs(n, "eth0", 10*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if len(kernel) != 1 || kernel[0] != ips[0] {
					t.Fatalf("eth0 of %s holds %v, want the result's %v", id, kernel, ips)
				}
				if prev, dup := held[kernel[0].Addr()]; dup {
					t.Fatalf("%s holds %s inside its namespace, as %s does", id, kernel[0].Addr(), prev)
				}
				held[kernel[0].Addr()] = id
				atts = append(atts, att{ni, node, rt})
			}
		}
	}
	t.Logf("%d attachments across both networks hold %d distinct addresses", len(atts), len(held))

	for _, a := range atts {
		mustDel(ctx, t, nets[a.net].nodes[a.node], a.rt)
	}
	for _, pool := range []string{"e2e-shared-10.92.0.0-24", "e2e-shared-10.92.0.0-25"} {
		if left := reservations(t, env, pool); len(left) != 0 {
			t.Errorf("reservations of %s after DEL of every attachment: %v", pool, keys(left))
		}
	}
}

// TestKubernetesKilledMidAddInNetns runs concurrent ADDs through bridge in real namespaces and
// kills plugin processes at random moments: libcni kills bridge when its context is cancelled,
// and the netpool processes bridge is running are SIGKILLed directly. Afterwards no address is
// held twice, every ADD that returned a result holds its address, and GC listing the survivors
// leaves exactly them.
func TestKubernetesKilledMidAddInNetns(t *testing.T) {
	requireRoot(t)
	ctx := testContext(t)
	env := envtest.Shared(t)

	const (
		network = "e2e-kube-kill"
		subnet  = "10.93.0.0/24"
		pool    = "10.93.0.0-24"
		calls   = 16
	)
	fields := map[string]any{"range": subnet, "gateway": "10.93.0.1"}
	sock := mustAgent(t, env, "node-a")
	mustAgent(t, env, "node-b") // present, so that GC on node-a has another node's data to leave alone
	host := mustNetNS(t)
	node := mustNetwork(t, host, kubeConflist(t, network, "np-kk", sock, fields), nil)

	// A first ADD creates the pool and claims a block, so the kills land in ordinary ADDs.
	warm := podAttachment("kill-warm", mustNetNS(t), "eth0", "e2e", "pod-kill-warm")
	warmIPs := resultIPs(t, mustAdd(ctx, t, node, warm))

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	rts := make([]*libcni.RuntimeConf, calls)
	results := make([]*current.Result, calls)
	errs := make([]error, calls)
	// The killer SIGKILLs half of the netpool processes it sees running under bridge, each at a
	// random moment of its run, until every ADD has returned.
	killRng := rand.New(rand.NewPCG(rng.Uint64(), 5))
	killed := 0
	stop, killerDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(killerDone)
		decided := map[int]bool{}
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			for _, pid := range ipamChildren("netpool") {
				if _, ok := decided[pid]; ok {
					continue
				}
				decided[pid] = killRng.IntN(2) == 0
				if decided[pid] && syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed++
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range calls {
		rts[i] = podAttachment(fmt.Sprintf("kill-%d", i), mustNetNS(t), "eth0", "e2e", fmt.Sprintf("pod-kill-%d", i))
		callCtx, cancel := context.WithCancel(ctx)
		// The calls start spread over 300ms, so that they overlap the killer's polls at every stage;
		// a cancelled context kills bridge within the first 150ms of its run.
		start, delay := time.Duration(rng.IntN(300))*time.Millisecond, time.Duration(rng.IntN(150))*time.Millisecond
		wg.Go(func() {
			defer cancel()
			time.Sleep(start)
			switch i % 4 {
			case 0: // a quarter are cancelled early in their run, so some calls are surely cut short
				time.AfterFunc(delay/8, cancel)
			case 3: // a quarter run undisturbed by their own context
			default:
				time.AfterFunc(delay, cancel)
			}
			results[i], errs[i] = node.Add(callCtx, rts[i])
		})
	}
	wg.Wait()
	close(stop)
	<-killerDone

	valid := []types.GCAttachment{{ContainerID: warm.ContainerID, IfName: warm.IfName}}
	want := map[string]netip.Addr{warm.ContainerID: warmIPs[0].Addr()}
	for i, res := range results {
		if errs[i] != nil {
			continue
		}
		ips := resultIPs(t, res)
		if len(ips) != 1 {
			t.Fatalf("ADD %s got %v, want one address", rts[i].ContainerID, ips)
		}
		want[rts[i].ContainerID] = ips[0].Addr()
		valid = append(valid, types.GCAttachment{ContainerID: rts[i].ContainerID, IfName: rts[i].IfName})
	}

	held := env.SettledReservations(t, pool)
	byOwner, byAddr := map[string]string{}, map[string]string{}
	for _, r := range held {
		if prev, dup := byOwner[r.Spec.ContainerID]; dup {
			t.Errorf("%s holds %s and %s", r.Spec.ContainerID, prev, r.Spec.Address)
		}
		if prev, dup := byAddr[r.Spec.Address]; dup {
			t.Errorf("%s held by %s and %s", r.Spec.Address, prev, r.Spec.ContainerID)
		}
		byOwner[r.Spec.ContainerID], byAddr[r.Spec.Address] = r.Spec.Address, r.Spec.ContainerID
	}
	for id, addr := range want {
		if byOwner[id] != addr.String() {
			t.Errorf("%s got %s, the API server gives it %q", id, addr, byOwner[id])
		}
	}
	t.Logf("%d of %d ADDs returned a result (%d netpool processes SIGKILLed); %d reservations before GC",
		len(want)-1, calls, killed, len(held))
	if len(want) == calls+1 {
		t.Errorf("every ADD returned a result: no call was interrupted, the run tested nothing")
	}

	if err := node.GCIPAM(ctx, valid); err != nil {
		t.Fatalf("GC on node-a: %v", err)
	}
	after := env.SettledReservations(t, pool)
	got := map[string]string{}
	for _, r := range after {
		got[r.Spec.ContainerID] = r.Spec.Address
	}
	if len(got) != len(want) || len(after) != len(want) {
		t.Errorf("reservations after GC: %v, want the %d survivors", got, len(want))
	}
	for id, addr := range want {
		if got[id] != addr.String() {
			t.Errorf("after GC %s holds %q, want %s", id, got[id], addr)
		}
	}

	// The pool still works, and DEL of the survivors empties it.
	after7 := podAttachment("kill-after", mustNetNS(t), "eth0", "e2e", "pod-kill-after")
	mustAdd(ctx, t, node, after7)
	mustDel(ctx, t, node, after7)
	mustDel(ctx, t, node, warm)
	for i := range calls {
		if errs[i] == nil {
			mustDel(ctx, t, node, rts[i])
		}
	}
	if left := reservations(t, env, pool); len(left) != 0 {
		t.Errorf("reservations after DEL of every survivor: %v", keys(left))
	}
}

// TestKubernetesAPIServerRestartInNetns stops the control plane while pods are being attached on
// two nodes: ADDs fail with code 11 (the agent's answer, surfaced through bridge) and, after
// StartControlPlane, the runtime's retries succeed with distinct addresses, and DEL of everything
// leaves no reservation.
func TestKubernetesAPIServerRestartInNetns(t *testing.T) {
	requireRoot(t)
	ctx := testContext(t)
	env := envtest.Start(t)

	const (
		network = "e2e-kube-outage"
		subnet  = "10.94.0.0/24"
		pool    = "10.94.0.0-24"
	)
	fields := map[string]any{"range": subnet, "gateway": "10.94.0.1"}
	nodes := twoNodes(t, env, network, "np-ko", fields)

	type pod struct {
		node int
		rt   *libcni.RuntimeConf
		ns   ns.NetNS
	}
	var before []pod
	for i := range 4 {
		n := mustNetNS(t)
		id := fmt.Sprintf("up-%d", i)
		p := pod{i % 2, podAttachment(id, n, "eth0", "e2e", "pod-"+id), n}
		mustAdd(ctx, t, nodes[p.node], p.rt)
		before = append(before, p)
	}

	if err := env.CrashAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := env.StopControlPlane(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = env.StartControlPlane()
		}
	})
	// The ADDs of the outage run at once; each waits out the agent's API bound and fails with 11.
	during := make([]pod, 4)
	downErrs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range during {
		n := mustNetNS(t)
		id := fmt.Sprintf("down-%d", i)
		during[i] = pod{i % 2, podAttachment(id, n, "eth0", "e2e", "pod-"+id), n}
		wg.Go(func() {
			start := time.Now()
			var res *current.Result
			res, downErrs[i] = nodes[during[i].node].Add(ctx, during[i].rt)
			if downErrs[i] == nil {
				downErrs[i] = fmt.Errorf("succeeded with %v", res.IPs)
			}
			t.Logf("ADD %s with the control plane down failed after %v: %v", id, time.Since(start).Round(time.Millisecond), downErrs[i])
		})
	}
	wg.Wait()
	for i, err := range downErrs {
		if code := harness.CNIErrorCode(err); code != types.ErrTryAgainLater {
			t.Errorf("ADD %s with the control plane down: code %d (%v), want code 11", during[i].rt.ContainerID, code, err)
		}
	}
	if err := env.StartControlPlane(); err != nil {
		t.Fatal(err)
	}
	restarted = true

	// As a runtime does, each failed ADD is followed by DEL (bridge has left its veth), then
	// retried with a backoff while the agents reconnect.
	for _, p := range during {
		var err error
		poll.Eventually(t, 30*time.Second, "the retried DEL and ADD of "+p.rt.ContainerID+" are answered", func() error {
			if err = nodes[p.node].Del(ctx, p.rt); err == nil {
				_, err = nodes[p.node].Add(ctx, p.rt)
			}
			if harness.CNIErrorCode(err) == types.ErrTryAgainLater {
				return err
			}
			return nil
		})
		if err != nil {
			t.Fatalf("retried DEL and ADD of %s: %v", p.rt.ContainerID, err)
		}
	}

	held := reservations(t, env, pool)
	addrs := map[string]string{}
	for _, p := range append(append([]pod{}, before...), during...) {
		r, ok := held[p.rt.ContainerID]
		if !ok {
			t.Errorf("no reservation for %s", p.rt.ContainerID)
			continue
		}
		if prev, dup := addrs[r.Spec.Address]; dup {
			t.Errorf("%s held by %s and %s", r.Spec.Address, prev, p.rt.ContainerID)
		}
		addrs[r.Spec.Address] = p.rt.ContainerID
		kernel, err := harness.WaitAddrs(p.ns, "eth0", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(kernel) != 1 || kernel[0].Addr().String() != r.Spec.Address {
			t.Errorf("eth0 of %s holds %v, its reservation is %s", p.rt.ContainerID, kernel, r.Spec.Address)
		}
	}
	if len(held) != len(before)+len(during) {
		t.Errorf("reservations = %v, want the %d pods", keys(held), len(before)+len(during))
	}

	for _, p := range append(before, during...) {
		mustDel(ctx, t, nodes[p.node], p.rt)
	}
	if left := reservations(t, env, pool); len(left) != 0 {
		t.Errorf("reservations after DEL of every attachment: %v", keys(left))
	}
}
