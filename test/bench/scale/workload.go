package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/util/flowcontrol"

	"github.com/netpool/netpool/cni-plugin/agentproto"
	"github.com/netpool/netpool/test/apicount"
)

// ledger is what the runtime believes is attached: every successful ADD not yet DELed, with the
// address its result gave. The final check compares it with the API server's reservations.
type ledger struct {
	mu sync.Mutex
	// live maps an attachment (container ID) to its node and address.
	live map[string]attachment
	// byNode lists each node's live attachments, for churn's DELs.
	byNode map[string][]string
	// given counts results that handed out an address some other live attachment held.
	given map[netip.Addr]string
	dups  []string
	// unsure are attachments whose DEL never succeeded: their reservation may or may not exist.
	unsure map[string]bool
}

type attachment struct {
	node string
	addr netip.Addr
}

func newLedger() *ledger {
	return &ledger{live: map[string]attachment{}, byNode: map[string][]string{}, given: map[netip.Addr]string{}, unsure: map[string]bool{}}
}

func (l *ledger) added(node, id string, a netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, taken := l.given[a]; taken && prev != id {
		l.dups = append(l.dups, fmt.Sprintf("%s given to %s and %s", a, prev, id))
	}
	l.given[a] = id
	l.live[id] = attachment{node: node, addr: a}
	l.byNode[node] = append(l.byNode[node], id)
}

func (l *ledger) deleted(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.live[id]
	if !ok {
		return
	}
	delete(l.live, id)
	if l.given[at.addr] == id {
		delete(l.given, at.addr)
	}
	l.byNode[at.node] = slices.DeleteFunc(l.byNode[at.node], func(x string) bool { return x == id })
}

// unknown records that id's state is unknown: its DEL never succeeded.
func (l *ledger) unknown(id string) {
	l.deleted(id)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unsure[id] = true
}

func (l *ledger) has(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.live[id]
	return ok
}

// pick returns a random live attachment of node, for a DEL.
func (l *ledger) pick(node string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := l.byNode[node]
	if len(ids) == 0 {
		return "", false
	}
	return ids[rand.IntN(len(ids))], true
}

// phase is one workload's outcome and what it cost.
type phase struct {
	name     string
	adds     int
	dels     int
	failures int
	// firstFailure is the first failure's message.
	firstFailure string
	// unsettled are the calls that failed: the runtime DELs each attachment whose ADD or DEL
	// failed until a DEL succeeds (settle does, after the phase's measurement).
	unsettled []op
	// settled counts them once DELed; stuck those whose DEL never succeeded.
	settled, stuck int
	lat            []time.Duration // of the ADDs
	delLat         []time.Duration
	wall           time.Duration
	before         snapshot
	after          snapshot
	// active and idle sum the counters of the nodes that did work in the phase, and of the others.
	active, idle           apicount.Counts
	activeNodes, idleNodes int
}

// op is one CNI call of a workload.
type op struct {
	h    *hollow
	verb string
	id   string
}

// runner drives CNI calls at the hollow agents and records them.
type runner struct {
	o      options
	stdin  []byte
	ledger *ledger
	seq    int // attachment ids
}

func newRunner(o options) *runner {
	stdin := fmt.Appendf(nil, `{"cniVersion":"1.1.0","name":"scale","ipam":{"type":"netpool","datastore":"kubernetes","pool":%q}}`, poolName)
	return &runner{o: o, stdin: stdin, ledger: newLedger()}
}

func (r *runner) newID(node string) string {
	r.seq++
	return fmt.Sprintf("%s-%d", node, r.seq)
}

// run executes ops with at most parallel in flight and, when rate > 0, at most rate starts per
// second, recording each into p and the ledger.
func (r *runner) run(ctx context.Context, p *phase, ops []op, parallel int, rate float64) {
	if parallel <= 0 {
		parallel = len(ops)
	}
	var limiter flowcontrol.RateLimiter
	if rate > 0 {
		limiter = flowcontrol.NewTokenBucketRateLimiter(float32(rate), max(1, int(rate/10)))
	}
	var mu sync.Mutex
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	began := time.Now()
	for _, o := range ops {
		if limiter != nil {
			limiter.Accept()
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t0 := time.Now()
			resp := o.h.call(ctx, o.verb, o.id, r.stdin)
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if resp.Error != nil {
				p.failures++
				p.unsettled = append(p.unsettled, o)
				if p.firstFailure == "" {
					p.firstFailure = fmt.Sprintf("%s %s on %s: code %d: %s", o.verb, o.id, o.h.node, resp.Error.Code, resp.Error.Msg)
				}
				return
			}
			switch o.verb {
			case agentproto.VerbAdd:
				a, err := firstAddress(resp.Stdout)
				if err != nil {
					p.failures++
					p.unsettled = append(p.unsettled, o)
					if p.firstFailure == "" {
						p.firstFailure = fmt.Sprintf("ADD %s: %v", o.id, err)
					}
					return
				}
				p.adds++
				p.lat = append(p.lat, d)
				r.ledger.added(o.h.node, o.id, a)
			case agentproto.VerbDel:
				p.dels++
				p.delLat = append(p.delLat, d)
				r.ledger.deleted(o.id)
			}
		})
	}
	wg.Wait()
	p.wall = time.Since(began)
}

// settle DELs the attachment of each failed call of p, as the runtime does (CNI: a failed ADD is
// followed by DEL, and a failed DEL is repeated), until the DEL succeeds or tries run out.
func (r *runner) settle(ctx context.Context, p *phase) {
	const tries = 30
	for _, o := range p.unsettled {
		ok := false
		for range tries {
			if resp := o.h.call(ctx, agentproto.VerbDel, o.id, r.stdin); resp.Error == nil {
				ok = true
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		if ok {
			p.settled++
			r.ledger.deleted(o.id)
		} else {
			p.stuck++
			r.ledger.unknown(o.id)
		}
	}
}

// firstAddress is the first address of an ADD result.
func firstAddress(stdout []byte) (netip.Addr, error) {
	var res struct {
		IPs []struct{ Address string } `json:"ips"`
	}
	if err := json.Unmarshal(stdout, &res); err != nil || len(res.IPs) == 0 {
		return netip.Addr{}, fmt.Errorf("result %q has no address: %v", stdout, err)
	}
	p, err := netip.ParsePrefix(res.IPs[0].Address)
	if err != nil {
		return netip.Addr{}, err
	}
	return p.Addr(), nil
}

// measure runs work between two snapshots and sums the counters of the nodes it names active.
func measure(ctx context.Context, s *sampler, hs []*hollow, p *phase, active func(*hollow) bool, work func() error) error {
	before := make([]apicount.Counts, len(hs))
	for i, h := range hs {
		before[i] = h.count.Snapshot()
	}
	var err error
	if p.before, err = s.take(ctx); err != nil {
		return err
	}
	if err := work(); err != nil {
		return err
	}
	// Let the watches deliver what the phase caused before counting it.
	time.Sleep(settle)
	if p.after, err = s.take(ctx); err != nil {
		return err
	}
	p.active, p.idle = apicount.New().Snapshot(), apicount.New().Snapshot()
	for i, h := range hs {
		d := attribute(h.count.Snapshot().Sub(before[i]), h.node)
		if active(h) {
			p.active.Add(d)
			p.activeNodes++
		} else {
			p.idle.Add(d)
			p.idleNodes++
		}
	}
	return nil
}

// settle is how long a phase waits after its last call for the watches to deliver what it caused.
const settle = 3 * time.Second

// density: one node does perNode ADDs at once while the others idle; then they are DELed
// (outside the measurement).
func (r *runner) density(ctx context.Context, s *sampler, hs []*hollow, perNode int) (*phase, error) {
	p := &phase{name: fmt.Sprintf("density: 1 node x %d ADDs at once", perNode)}
	h := hs[0]
	var ops []op
	for range perNode {
		ops = append(ops, op{h: h, verb: agentproto.VerbAdd, id: r.newID(h.node) + "-density"})
	}
	err := measure(ctx, s, hs, p, func(x *hollow) bool { return x == h }, func() error {
		r.run(ctx, p, ops, 0, 0)
		return nil
	})
	if err != nil {
		return p, err
	}
	r.settle(ctx, p)
	var dels []op
	for _, o := range ops {
		if r.ledger.has(o.id) {
			dels = append(dels, op{h: h, verb: agentproto.VerbDel, id: o.id})
		}
	}
	cleanup := &phase{}
	r.run(ctx, cleanup, dels, 0, 0)
	if cleanup.failures > 0 {
		return p, fmt.Errorf("DEL after the density phase: %s", cleanup.firstFailure)
	}
	return p, nil
}

// rollout: every node does perNode ADDs, interleaved so that all nodes are busy at once, at most
// parallel in flight and rate per second.
func (r *runner) rollout(ctx context.Context, s *sampler, hs []*hollow, perNode, parallel int, rate float64) (*phase, error) {
	p := &phase{name: fmt.Sprintf("rollout: %d nodes x %d ADDs", len(hs), perNode)}
	var ops []op
	for range perNode {
		for _, h := range hs {
			ops = append(ops, op{h: h, verb: agentproto.VerbAdd, id: r.newID(h.node)})
		}
	}
	err := measure(ctx, s, hs, p, func(*hollow) bool { return true }, func() error {
		r.run(ctx, p, ops, parallel, rate)
		return nil
	})
	r.settle(ctx, p)
	return p, err
}

// churn: pairs per second, each a DEL of a random live attachment of a random node and an ADD on
// that node, for d.
func (r *runner) churn(ctx context.Context, s *sampler, hs []*hollow, pairs float64, d time.Duration, parallel int) (*phase, error) {
	p := &phase{name: fmt.Sprintf("churn: %.0f ADD+DEL/s for %s", pairs, d)}
	n := int(pairs * d.Seconds())
	touched := map[*hollow]bool{}
	var ops []op
	for range n {
		h := hs[rand.IntN(len(hs))]
		touched[h] = true
		if id, ok := r.ledger.pick(h.node); ok && !slices.ContainsFunc(ops, func(o op) bool { return o.id == id }) {
			ops = append(ops, op{h: h, verb: agentproto.VerbDel, id: id})
		}
		ops = append(ops, op{h: h, verb: agentproto.VerbAdd, id: r.newID(h.node) + "-churn"})
	}
	err := measure(ctx, s, hs, p, func(h *hollow) bool { return touched[h] }, func() error {
		r.run(ctx, p, ops, parallel, 2*pairs)
		return nil
	})
	r.settle(ctx, p)
	return p, err
}

// storm: every agent stops and all start again at once, each from nothing, as after a DaemonSet
// update or a control-plane outage.
type storm struct {
	phase
	ready    time.Duration // until the last agent was ready
	readyP50 time.Duration
	readyP99 time.Duration
	// wide are LISTs and WATCHes of a cluster-wide collection an agent does not need, by request.
	wide map[string]int
}

// stormProfileFor is the length of -storm-profile's profile: the storm's first seconds, when every
// agent's watches start.
const stormProfileFor = 20 * time.Second

func (r *runner) storm(ctx context.Context, s *sampler, hs []*hollow, within time.Duration, profile string) (*storm, error) {
	st := &storm{phase: phase{name: fmt.Sprintf("restart storm: %d agents at once", len(hs))}}
	for _, h := range hs {
		h.stop()
	}
	time.Sleep(settle) // the watches close
	var err error
	if st.before, err = s.take(ctx); err != nil {
		return st, err
	}
	profiled := make(chan error, 1)
	if profile != "" {
		go func() { profiled <- s.cpuProfile(ctx, profile, stormProfileFor) }()
	} else {
		profiled <- nil
	}
	began := time.Now()
	_, st.failures, err = startAll(ctx, hs, 0, within)
	if err != nil {
		st.firstFailure = err.Error()
	}
	st.ready = time.Since(began)
	if err := <-profiled; err != nil {
		return st, err
	}
	st.wall = st.ready
	if st.after, err = s.take(ctx); err != nil {
		return st, err
	}
	st.active = apicount.New().Snapshot()
	var readies []time.Duration
	st.wide = map[string]int{}
	for _, h := range hs {
		st.active.Add(attribute(h.count.Snapshot(), h.node))
		if h.cancel == nil {
			continue // not ready: stopped
		}
		readies = append(readies, h.ready)
		for req, n := range h.wide() {
			st.wide[req] += n
		}
	}
	st.activeNodes = len(hs)
	st.readyP50, st.readyP99 = percentile(readies, 0.50), percentile(readies, 0.99)
	return st, nil
}

// percentile returns the p-quantile of ds (nearest rank).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// describe lists a map of counts as "k n, k n" in key order.
func describe[V int | int64](m map[string]V, scale float64) string {
	var keys []string
	for k, v := range m {
		if v != 0 {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.3g", k, float64(m[k])/scale))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
