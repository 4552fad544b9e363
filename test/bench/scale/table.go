package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/netpool/netpool/test/apicount"
)

// Targets of the issue, judged by ok.
const (
	// maxOtherEvents is the watch events an idle node may receive because of other nodes' ADDs in
	// the kinds the node filters (reservations, slices, its Node).
	maxOtherEvents = 0
	// maxCPURatio bounds the API server's and etcd's CPU per ADD against a raw Create of an
	// unwatched tiny custom resource.
	maxCPURatio = 1.2
	// maxReadsPerADD and maxWritesPerADD bound the hot path's requests (slice claims amortized).
	maxReadsPerADD  = 0.0
	maxWritesPerADD = 1 + 1.0/16
	// maxP99 bounds the ADD latency of the rollout.
	maxP99 = time.Second
	// maxStormReady bounds the restart storm.
	maxStormReady = 60 * time.Second
	// maxRealAgentRSS bounds a real agent process's resident memory.
	maxRealAgentRSS = 30 << 20
)

// cpuOf is the API server's and etcd's CPU between two snapshots.
func cpuOf(before, after snapshot) time.Duration {
	return after.apiserver.CPU - before.apiserver.CPU + after.etcd.CPU - before.etcd.CPU
}

// perCreate is the baseline's control-plane CPU per Create.
func (b *baseline) perCreate() time.Duration {
	return cpuOf(b.before, b.after) / time.Duration(max(1, b.creates-b.fails))
}

func (b *baseline) rate() float64 { return float64(b.creates-b.fails) / b.wall.Seconds() }

// unwatched is the baseline the CPU target is judged against.
func (r *report) unwatched() *baseline {
	if len(r.raws) == 0 {
		return nil
	}
	return r.raws[0]
}

func (r *report) phase(prefix string) *phase {
	for _, p := range r.phases {
		if strings.HasPrefix(p.name, prefix) {
			return p
		}
	}
	return nil
}

// perCall is the control-plane CPU of the phase per call (ADD or DEL).
func (p *phase) perCall() time.Duration {
	return cpuOf(p.before, p.after) / time.Duration(max(1, p.adds+p.dels))
}

// idleRate is the control plane's CPU per second with the agents connected and nothing to do.
func (r *report) idleRate() float64 {
	if r.idle == nil {
		return 0
	}
	return cpuOf(r.idle.before, r.idle.after).Seconds() / r.idle.after.at.Sub(r.idle.before.at).Seconds()
}

// netPerCall is perCall less what the control plane spends at idle over the phase's length.
func (r *report) netPerCall(p *phase) time.Duration {
	cpu := cpuOf(p.before, p.after).Seconds() - r.idleRate()*p.after.at.Sub(p.before.at).Seconds()
	return time.Duration(max(0, cpu) / float64(max(1, p.adds+p.dels)) * float64(time.Second))
}

// ratios is cpu against each baseline's CPU per Create: "2.10x the unwatched CR, ...".
func ratios(cpu time.Duration, raws []*baseline) string {
	var parts []string
	for _, b := range raws {
		if per := b.perCreate(); per > 0 {
			parts = append(parts, fmt.Sprintf("%.2fx the %s", float64(cpu)/float64(per), b.short))
		} else {
			parts = append(parts, "no CPU measured for the "+b.short)
		}
	}
	return strings.Join(parts, ", ")
}

// hotPath is the active nodes' reads and writes per ADD: GET and LIST, and POST, PUT, PATCH and
// DELETE.
func (p *phase) hotPath() (reads, writes float64) {
	n := float64(max(1, p.adds+p.dels))
	return float64(p.active.TotalRequests("GET", "LIST")) / n, float64(p.active.TotalRequests("POST", "PUT", "PATCH", "DELETE")) / n
}

// otherEvents is the watch events carrying another node's object that reached the idle nodes.
func (p *phase) otherEvents() int {
	n, _ := eventsOf(p.idle, causeOtherNode)
	return n
}

func (r *report) ok(o options) bool {
	return len(r.misses(o)) == 0
}

// misses lists the targets this run missed.
func (r *report) misses(o options) []string {
	var out []string
	if r.verdict == nil || !r.verdict.ok() {
		out = append(out, "the final LIST does not match the ADDs and DELs")
	}
	for _, p := range r.phases {
		if p.failures > 0 {
			out = append(out, fmt.Sprintf("%s: %d failures", p.name, p.failures))
		}
		if p.stuck > 0 {
			out = append(out, fmt.Sprintf("%s: %d attachments whose DEL never succeeded", p.name, p.stuck))
		}
		if n := p.otherEvents(); n > maxOtherEvents {
			out = append(out, fmt.Sprintf("%s: %d events of other nodes' reservations or slices at idle nodes", p.name, n))
		}
	}
	if p := r.phase("rollout"); p != nil {
		if p99 := percentile(p.lat, 0.99); p99 > maxP99 {
			out = append(out, fmt.Sprintf("rollout ADD p99 %s > %s", p99.Round(time.Millisecond), maxP99))
		}
		reads, writes := p.hotPath()
		if reads > maxReadsPerADD || writes > maxWritesPerADD {
			out = append(out, fmt.Sprintf("rollout: %.3f reads and %.3f writes per ADD", reads, writes))
		}
		if b := r.unwatched(); b != nil {
			if ratio := float64(r.netPerCall(p)) / float64(b.perCreate()); ratio > maxCPURatio {
				out = append(out, fmt.Sprintf("rollout: control-plane CPU per ADD %.2fx a raw Create of an unwatched custom resource", ratio))
			}
		}
	}
	if r.storm != nil {
		if r.storm.failures > 0 {
			out = append(out, fmt.Sprintf("restart storm: %d agents not ready within -storm-timeout", r.storm.failures))
		}
		if r.storm.ready > maxStormReady {
			out = append(out, fmt.Sprintf("restart storm: ready after %s", r.storm.ready.Round(time.Millisecond)))
		}
		if len(r.storm.wide) > 0 {
			out = append(out, "restart storm: agents listed whole collections: "+describe(r.storm.wide, 1))
		}
	}
	if o.realAgent && (r.realErr != "" || r.realRSS > maxRealAgentRSS) {
		out = append(out, fmt.Sprintf("real agent: RSS %.1f MiB %s", mib(r.realRSS), r.realErr))
	}
	return out
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// print writes the run's tables.
func (r *report) print(w io.Writer, o options) {
	fanout := "its default"
	if o.statusFanout >= 0 {
		fanout = fmt.Sprint(o.statusFanout)
	}
	fmt.Fprintf(w, "hollow nodes: %d (asked %d), %d ADDs per node, pool %s (sliceSize %d), policy %v, agents' priority level %v, controller --pool-status-interval %s, --pool-status-fanout %s\n",
		r.nodes, o.nodes, o.pods, o.cidr, o.sliceSize, o.policy, o.policy && o.flowcontrol, o.statusInterval, fanout)
	if r.shortBy != "" {
		fmt.Fprintln(w, "stopped short:", r.shortBy)
	}
	per := func(v uint64) float64 { return float64(v) / float64(max(1, r.nodes)) / (1 << 20) }
	fmt.Fprintf(w, "agents up in %s; bench heap per hollow agent: %.2f MiB idle, %.2f MiB holding %d each\n",
		r.upTime.Round(time.Millisecond), per(r.heapIdle-min(r.heapIdle, r.heapBase)), per(r.heapFull-min(r.heapFull, r.heapBase)), o.pods)
	if o.realAgent {
		fmt.Fprintf(w, "real netpool-agent process in the full cluster: served after %s, RSS %.1f MiB, peak %.1f MiB %s\n",
			r.realReady.Round(time.Millisecond), mib(r.realRSS), mib(r.realHWM), r.realErr)
	}
	if r.idle != nil {
		own, _ := eventsOf(r.idle.idle, causeOwn)
		other, otherB := eventsOf(r.idle.idle, causeOtherNode, causeNoNode)
		n := float64(max(1, r.nodes))
		fmt.Fprintf(w, "idle %s, %d agents connected: apiserver+etcd CPU %.0f ms/s; per agent %.2f own and %.2f others' watch events (%.0f B), bookmarks: %s\n",
			idleFor, r.nodes, 1000*r.idleRate(), float64(own)/n, float64(other)/n, float64(otherB)/n, describe(r.idle.idle.Bookmarks, n))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nbaseline\tcreates/s\tapiserver+etcd CPU per create\tload avg\twatch events delivered")
	for _, b := range r.raws {
		delivered := "-"
		if b.watches > 0 {
			delivered = fmt.Sprintf("%d of %d creates, %d watches open, %d ended early", b.delivered, b.creates-b.fails, b.watches, b.watchesEnded)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%.1f\t%s\n", b.name, b.rate(), ms(b.perCreate()), b.after.load1, delivered)
	}
	_ = tw.Flush()
	for _, p := range r.phases {
		r.printPhase(w, p)
	}
	if s := r.storm; s != nil {
		r.printStorm(w, s)
	}
	if v := r.verdict; v != nil {
		fmt.Fprintf(w, "\nfinal LIST: %d reservations; %d duplicates, %d lost, %d left over (%d of attachments whose DEL never succeeded)\n",
			v.reservations, len(v.duplicates), len(v.lost), len(v.extra), v.unsure)
		for _, d := range first(v.duplicates, 5) {
			fmt.Fprintln(w, "  duplicate:", d)
		}
		for _, d := range first(v.lost, 5) {
			fmt.Fprintln(w, "  lost:", d)
		}
		for _, d := range first(v.extra, 5) {
			fmt.Fprintln(w, "  left over:", d)
		}
	}
	f := r.final
	if f.api != nil {
		res, slices := 0.0, 0.0
		if r.verdict != nil {
			res, slices = float64(r.verdict.reservations), float64(r.verdict.slices)
		}
		db := f.etcdMetrics.sum("etcd_mvcc_db_total_size_in_use_in_bytes")
		fmt.Fprintf(w, "etcd: %.0f reservations, %.0f slices, %.1f MiB in use (%.0f B per reservation, everything included); apiserver RSS %.0f MiB (peak %.0f), etcd RSS %.0f MiB (peak %.0f)\n",
			res, slices, db/(1<<20), db/max(1, res), mib(f.apiserver.RSS), mib(f.apiserver.HWM), mib(f.etcd.RSS), mib(f.etcd.HWM))
	}
	if misses := r.misses(o); len(misses) > 0 && o.targets {
		fmt.Fprintln(w, "\ntargets missed:")
		for _, m := range misses {
			fmt.Fprintln(w, "  -", m)
		}
	} else if o.targets {
		fmt.Fprintln(w, "\nevery target met")
	}
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

func (r *report) printPhase(w io.Writer, p *phase) {
	calls := max(1, p.adds+p.dels)
	fmt.Fprintf(w, "\n== %s: %d ADDs, %d DELs, %d failures in %s (%.0f calls/s); load avg %.1f -> %.1f\n",
		p.name, p.adds, p.dels, p.failures, p.wall.Round(time.Millisecond), float64(p.adds+p.dels)/p.wall.Seconds(), p.before.load1, p.after.load1)
	if p.firstFailure != "" {
		fmt.Fprintln(w, "   first failure:", p.firstFailure)
		fmt.Fprintf(w, "   each failed call's attachment DELed afterwards as a runtime does: %d settled, %d never\n", p.settled, p.stuck)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ADD latency p50 / p99 / max\t%s / %s / %s\n", ms(percentile(p.lat, 0.5)), ms(percentile(p.lat, 0.99)), ms(percentile(p.lat, 1)))
	if len(p.delLat) > 0 {
		fmt.Fprintf(tw, "DEL latency p50 / p99\t%s / %s\n", ms(percentile(p.delLat, 0.5)), ms(percentile(p.delLat, 0.99)))
	}
	reads, writes := p.hotPath()
	fmt.Fprintf(tw, "agent requests per call (busy nodes)\t%.3f reads, %.3f writes: %s\n", reads, writes, describe(p.active.Requests, float64(calls)))
	cpu := cpuOf(p.before, p.after)
	ratio := ""
	if len(r.raws) > 0 {
		ratio = fmt.Sprintf(", %s net of idle: %s", ms(r.netPerCall(p)), ratios(r.netPerCall(p), r.raws))
	}
	fmt.Fprintf(tw, "apiserver + etcd CPU\t%.1f s: %s per call%s; apiserver %.1f s, etcd %.1f s, controller %.1f s, agents+bench %.1f s\n",
		cpu.Seconds(), ms(p.perCall()), ratio, (p.after.apiserver.CPU - p.before.apiserver.CPU).Seconds(),
		(p.after.etcd.CPU - p.before.etcd.CPU).Seconds(), (p.after.controller.CPU - p.before.controller.CPU).Seconds(),
		(p.after.me.CPU - p.before.me.CPU).Seconds())
	fmt.Fprintf(tw, "apiserver requests per call (everyone)\t%s\n", apiRequests(p.before, p.after, float64(calls)))
	sent := p.after.api.sum("apiserver_watch_events_total") - p.before.api.sum("apiserver_watch_events_total")
	sentBytes := p.after.api.sum("apiserver_watch_events_sizes_sum") - p.before.api.sum("apiserver_watch_events_sizes_sum")
	fmt.Fprintf(tw, "watch events the apiserver sent\t%.0f (%.1f per call, %.1f MiB)\n", sent, sent/float64(calls), sentBytes/(1<<20))
	if f := describe(p.active.Failures, 1); f != "none" {
		fmt.Fprintf(tw, "agent requests without success (busy nodes)\t%s\n", f)
	}
	fmt.Fprintf(tw, "watches the API server closed as too slow\t%s\n", closedWatches(p.before, p.after))
	r.printEvents(tw, "busy node", p.active, p.activeNodes, p.adds+p.dels)
	r.printEvents(tw, "idle node", p.idle, p.idleNodes, p.adds+p.dels)
	fmt.Fprintf(tw, "apiserver / etcd RSS after\t%.0f / %.0f MiB\n", mib(p.after.apiserver.RSS), mib(p.after.etcd.RSS))
	_ = tw.Flush()
}

// printEvents prints the watch events per node of a group of nodes: those carrying the node's own
// objects, and the others (of which those carrying another node's object) apart.
func (r *report) printEvents(w io.Writer, what string, c apicount.Counts, nodes, calls int) {
	if nodes == 0 {
		return
	}
	own, ownB := eventsOf(c, causeOwn)
	other, otherB := eventsOf(c, causeOtherNode, causeNoNode)
	otherNode, _ := eventsOf(c, causeOtherNode)
	n := float64(nodes)
	fmt.Fprintf(w, "watch events per %s (%d nodes)\town work %.2f (%.0f B), others' %.2f (%.0f B; other nodes' objects %.2f): %s; per call of the phase: others' %.4f\n",
		what, nodes, float64(own)/n, float64(ownB)/n, float64(other)/n, float64(otherB)/n, float64(otherNode)/n, describe(c.Causes, n),
		float64(other)/n/float64(max(1, calls)))
}

// apiRequests is the API server's requests between two snapshots per call, by verb and resource.
func apiRequests(before, after snapshot, calls float64) string {
	m := grown(before, after, "apiserver_request_total", "verb", "resource")
	for k := range m {
		if verb, res, _ := strings.Cut(k, " "); verb == "WATCH" || verb == "CONNECT" || res == "" {
			delete(m, k)
		}
	}
	return describe(m, calls)
}

// grown is how much each sample of metric grew between two snapshots, keyed by the values of
// labels (joined by spaces).
func grown(before, after snapshot, metric string, labels ...string) map[string]int {
	m := map[string]int{}
	for k, v := range after.api {
		name, set, _ := strings.Cut(k, "{")
		if name != metric {
			continue
		}
		if d := int(v - before.api[k]); d > 0 {
			var key []string
			for _, l := range labels {
				key = append(key, label(set, l))
			}
			m[strings.Join(key, " ")] += d
		}
	}
	return m
}

// refusals are the requests API priority and fairness refused between two snapshots, by priority
// level and reason (queue-full; time-out: waited in its queue past its limit; concurrency-limit;
// cancelled).
func refusals(before, after snapshot) string {
	return describe(grown(before, after, "apiserver_flowcontrol_rejected_requests_total", "priority_level", "reason"), 1)
}

// closedWatches are the watches the API server's watch cache closed between two snapshots because
// their watcher did not take its events in time (each then starts again), by resource.
func closedWatches(before, after snapshot) string {
	return describe(grown(before, after, "apiserver_terminated_watchers_total", "resource"), 1)
}

// label returns the value of label name in a Prometheus label set `a="x",b="y"}`.
func label(labels, name string) string {
	i := strings.Index(","+labels, ","+name+`="`)
	if i < 0 {
		return ""
	}
	rest := labels[i+len(name)+2:]
	end := strings.IndexByte(rest, '"')
	if end < 0 {
		return ""
	}
	return rest[:end]
}

func (r *report) printStorm(w io.Writer, s *storm) {
	fmt.Fprintf(w, "\n== %s: all ready in %s (each agent: p50 %s, p99 %s), %d not ready; load avg %.1f -> %.1f\n",
		s.name, s.ready.Round(time.Millisecond), s.readyP50.Round(time.Millisecond), s.readyP99.Round(time.Millisecond), s.failures, s.before.load1, s.after.load1)
	if s.firstFailure != "" {
		fmt.Fprintln(w, "   first failure:", s.firstFailure)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	n := float64(max(1, s.activeNodes))
	var listed, initial int64
	for _, v := range s.active.ListBytes {
		listed += v
	}
	for _, v := range s.active.EventBytes {
		initial += v
	}
	fmt.Fprintf(tw, "per agent\t%s LIST bytes, %s of watch events (the initial state, streamed): %s\n",
		kib(float64(listed)/n), kib(float64(initial)/n), describe(s.active.EventBytes, n))
	fmt.Fprintf(tw, "requests per agent\t%s; watches %s\n", describe(s.active.Requests, n), describe(s.active.Watches, n))
	fmt.Fprintf(tw, "whole collections listed or watched (IPPools aside)\t%s\n", describe(s.wide, 1))
	fmt.Fprintf(tw, "agent requests without success\t%s\n", describe(s.active.Failures, 1))
	fmt.Fprintf(tw, "refused by priority and fairness (everyone's)\t%s\n", refusals(s.before, s.after))
	fmt.Fprintf(tw, "watches the API server closed as too slow\t%s\n", closedWatches(s.before, s.after))
	apiCPU := s.after.apiserver.CPU - s.before.apiserver.CPU
	fmt.Fprintf(tw, "apiserver + etcd CPU\t%.1f s (apiserver %.1f, etcd %.1f); apiserver RSS %.0f MiB\n", cpuOf(s.before, s.after).Seconds(),
		apiCPU.Seconds(), (s.after.etcd.CPU - s.before.etcd.CPU).Seconds(), mib(s.after.apiserver.RSS))
	if v := r.verdict; v != nil {
		// Nothing is created or deleted during the storm: the final LIST counts what every agent's
		// selected watches of reservations and slices were matched against.
		objects := v.reservations + v.slices
		perAgent, perObject := stormCost(apiCPU, s.activeNodes, objects)
		fmt.Fprintf(tw, "apiserver CPU per agent start\t%s; %.2f us per agent per reservation or slice stored (%d)\n",
			ms(perAgent), perObject, objects)
	}
	_ = tw.Flush()
}

// stormCost is the API server's CPU of the restart storm per agent, and per agent per object of
// the kinds the agents select from (each agent's watch with a label or field selector is served by
// a scan of every cached object of its kind: the storm costs agents x objects), in microseconds.
func stormCost(cpu time.Duration, agents, objects int) (perAgent time.Duration, perObjectUs float64) {
	if agents <= 0 {
		return 0, 0
	}
	perAgent = cpu / time.Duration(agents)
	if objects > 0 {
		perObjectUs = float64(perAgent.Nanoseconds()) / 1000 / float64(objects)
	}
	return perAgent, perObjectUs
}

func kib(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) }
