package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
	"github.com/netpool/netpool/test/bench/benchproc"
	"github.com/netpool/netpool/test/bench/fanout"
)

// The large scenario: one node's agent serving a pool that holds -large-count reservations.
const (
	largeNode    = "big-node"
	largeNetwork = "large" // the CNI network name (the config's "name")
	maxObject    = 64 << 10
	maxLatRatio  = 2.0
)

// largeReport is what the large scenario measured.
type largeReport struct {
	pool                string
	capacity            uint64
	blocks, blockSize   uint64
	fillWall            time.Duration
	fillReservations    int
	fillSlices          int
	fillFails           int
	firstFillFailure    string
	leftAfterEmptyDELs  int // reservations of the pool after the empty phase's DELs
	warmUp, empty, full largePhase
	reservations        int // reservations of the pool on the API server at the end
	distinct            int
	listWall            time.Duration
	biggest             map[string]objSize // by kind
	wall                time.Duration
	loadAvg             string // /proc/loadavg's 1, 5 and 15 minute figures at the start
}

// largePhase is one agent life: its start, then ADDs and DELs through plugin processes.
type largePhase struct {
	start        time.Duration // from exec until the socket answers (the cache has synced)
	add, del     []time.Duration
	failures     int
	firstFailure string
	duplicates   int
	hwm, rss     int64 // agent's VmHWM and VmRSS in bytes, read after the DELs
}

type objSize struct {
	name  string
	bytes int
}

// runLarge measures ADD latency on an empty pool and on the same pool holding o.largeCount
// reservations of one node, the size of every object netpool wrote, and the agent's memory.
func runLarge(ctx context.Context, o options) (*largeReport, error) {
	began := time.Now()
	subnet, err := netip.ParsePrefix(o.largeRange)
	if err != nil {
		return nil, fmt.Errorf("-large-range: %w", err)
	}
	c, err := startCluster(ctx, o, 0)
	if c != nil {
		defer c.close(o.keep)
	}
	if err != nil {
		return nil, err
	}
	rep := &largeReport{pool: ipamv1.PoolName("", subnet.Masked()), biggest: map[string]objSize{}, loadAvg: loadAvg()}

	// A first agent life, not measured, creates the pool (the API server's first IPPool write takes
	// about 2 s) and warms the API server's paths of reservations and slices; the empty phase then
	// runs on a fresh start of the same agent, as the full phase does.
	conf := netConf(largeNetwork, subnet.Masked().String(), filepath.Join(c.dir, largeNode+".sock"))
	if err := largeRun(ctx, c, o, conf, "warm-up", &rep.warmUp); err != nil {
		return nil, err
	}
	if err := largeRun(ctx, c, o, conf, "empty", &rep.empty); err != nil {
		return nil, err
	}
	left, err := countPool(ctx, c, rep.pool)
	if err != nil {
		return nil, err
	}
	rep.leftAfterEmptyDELs = left // after the warm-up's and the empty phase's DELs

	pool := &ipamv1.IPPool{}
	if err := c.client.Get(ctx, client.ObjectKey{Name: rep.pool}, pool); err != nil {
		return nil, fmt.Errorf("the agent did not create IPPool %s: %w", rep.pool, err)
	}
	if err := fill(ctx, c, o, pool, rep); err != nil {
		return nil, err
	}
	if err := largeRun(ctx, c, o, conf, "full", &rep.full); err != nil {
		return nil, err
	}
	if err := objectSizes(ctx, c, rep); err != nil {
		return nil, err
	}
	rep.wall = time.Since(began)
	return rep, nil
}

// largeRun starts the agent of the large node, makes o.largeADDs ADDs then as many DELs through
// plugin processes, o.largeConcurrency at a time, reads the agent's memory and stops it.
func largeRun(ctx context.Context, c *cluster, o options, conf, tag string, ph *largePhase) error {
	t0 := time.Now()
	a, err := c.startAgent(ctx, largeNode)
	if err != nil {
		return err
	}
	ph.start = time.Since(t0)
	var mu sync.Mutex
	held := map[string]bool{}
	call := func(verb string, lat *[]time.Duration) {
		fanout.Each(o.largeADDs, o.largeConcurrency, func(i int) {
			t := time.Now()
			ip, err := pluginCall(ctx, c.plugin, verb, fmt.Sprintf("%s-%d", tag, i), i, conf)
			d := time.Since(t)
			mu.Lock()
			defer mu.Unlock()
			*lat = append(*lat, d)
			switch {
			case err != nil:
				ph.failures++
				if ph.firstFailure == "" {
					ph.firstFailure = err.Error()
				}
			case verb == "ADD" && held[ip]:
				ph.duplicates++
			case verb == "ADD":
				held[ip] = true
			}
		})
	}
	call("ADD", &ph.add)
	call("DEL", &ph.del)
	// A gone agent reads as zero here; stopAgent then reports how it exited.
	mem, _ := benchproc.ReadProc(a.cmd.Process.Pid)
	ph.hwm, ph.rss = mem.HWM, mem.RSS
	return c.stopAgent(a)
}

// fill creates, from this warm process with o.concurrency goroutines, o.largeCount reservations on
// the first usable addresses of pool and the slices (blocks) they lie in, all of the large node,
// as its agent would have made them.
func fill(ctx context.Context, c *cluster, o options, pool *ipamv1.IPPool, rep *largeReport) error {
	subnet, err := netip.ParsePrefix(pool.Spec.Range)
	if err != nil {
		return err
	}
	r, err := ipam.ParseRange("range", ipam.RangeSpec{Range: pool.Spec.Range}, netip.Addr{})
	if err != nil {
		return err
	}
	bits := int(pool.Spec.SliceSize)
	if bits == 0 { // kubestore's default: blocks of 64 addresses, or a sixteenth of a smaller range
		bitLen := subnet.Addr().BitLen()
		bits = min(max(bitLen-6, subnet.Bits()+4), bitLen, subnet.Bits()+63)
	}
	if bits-subnet.Bits() < 64 {
		rep.blocks = 1 << (bits - subnet.Bits())
	}
	if w := subnet.Addr().BitLen() - bits; w < 64 {
		rep.blockSize = 1 << w
	}
	if cp := r.Capacity(); cp.IsUint64() {
		rep.capacity = cp.Uint64()
	}
	if uint64(o.largeCount) > rep.capacity {
		return fmt.Errorf("-large-count %d exceeds the capacity %d of %s", o.largeCount, rep.capacity, subnet)
	}

	// The first largeCount usable addresses, and the blocks they lie in (numbered from the start
	// of the range, as kubestore numbers them).
	addrs := make([]netip.Addr, 0, o.largeCount)
	var blocks []netip.Prefix
	block, index := netip.PrefixFrom(subnet.Addr(), bits), 0
	for a, ok := r.NextAllowed(r.Start); ok && len(addrs) < o.largeCount; a, ok = r.NextAllowed(a.Next()) {
		for !block.Contains(a) {
			index++
			block = netip.PrefixFrom(ipam.LastOf(block).Next(), bits)
		}
		if len(blocks) <= index {
			blocks = append(blocks, block)
		}
		addrs = append(addrs, a)
	}
	labels := func() map[string]string {
		return map[string]string{ipamv1.NodeLabel: ipamv1.LabelValue(largeNode), ipamv1.PoolLabel: ipamv1.LabelValue(pool.Name)}
	}
	objs := make([]client.Object, 0, len(blocks)+len(addrs))
	for i, b := range blocks {
		objs = append(objs, &ipamv1.IPPoolSlice{
			ObjectMeta: metav1.ObjectMeta{Name: ipamv1.SliceName(pool.Name, uint64(i)), Labels: labels()},
			Spec:       ipamv1.IPPoolSliceSpec{Pool: pool.Name, Range: b.String(), Node: largeNode},
		})
	}
	for i, a := range addrs {
		// Mirrors kubestore's reservation of an inline pool without network_name: the scope is
		// the (empty) network name, so the name is the address alone.
		objs = append(objs, &ipamv1.OverlappingRangeIPReservation{
			ObjectMeta: metav1.ObjectMeta{
				Name: ipamv1.ReservationName(pool.Spec.NetworkName, a), Labels: labels(),
				Annotations: map[string]string{ipamv1.NetworkAnnotation: largeNetwork},
			},
			Spec: ipamv1.OverlappingRangeIPReservationSpec{
				Address: a.String(), Pool: pool.Name, ContainerID: fmt.Sprintf("fill%08d", i), IfName: "net1",
				PodRef: fmt.Sprintf("bench/fill-%d", i), PodUID: fmt.Sprintf("uid-fill-%d", i),
				Node: largeNode, NetworkName: pool.Spec.NetworkName,
			},
		})
	}
	var mu sync.Mutex
	start := time.Now()
	fanout.Each(len(objs), o.concurrency, func(i int) {
		err := createRetrying(ctx, c.client, objs[i])
		if _, slice := objs[i].(*ipamv1.IPPoolSlice); slice && apierrors.IsAlreadyExists(err) {
			err = nil // the empty phase left this block with the node
		}
		if err != nil {
			mu.Lock()
			rep.fillFails++
			if rep.firstFillFailure == "" {
				rep.firstFillFailure = err.Error()
			}
			mu.Unlock()
		}
	})
	rep.fillWall = time.Since(start)
	rep.fillReservations, rep.fillSlices = len(addrs), len(blocks)
	if rep.fillFails > 0 {
		return fmt.Errorf("%d of %d fill Creates failed; first: %s", rep.fillFails, len(objs), rep.firstFillFailure)
	}
	return nil
}

// createRetrying creates obj, retrying what a busy API server answers (429, 5xx, timeouts).
func createRetrying(ctx context.Context, c client.Client, obj client.Object) error {
	var err error
	for attempt := range 10 {
		err = c.Create(ctx, obj)
		if attempt > 0 && apierrors.IsAlreadyExists(err) {
			return nil // an earlier attempt whose answer was lost made it
		}
		if err == nil || apierrors.IsAlreadyExists(err) || apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
	}
	return err
}

// countPool counts the pool's reservations on the API server.
func countPool(ctx context.Context, c *cluster, pool string) (int, error) {
	var list ipamv1.OverlappingRangeIPReservationList
	err := c.client.List(ctx, &list, client.MatchingLabels{ipamv1.PoolLabel: ipamv1.LabelValue(pool)})
	return len(list.Items), err
}

// objectSizes reads, as JSON from the API server, every IPPool, every IPPoolSlice and every
// reservation (lists, page by page), keeps the largest of each kind, and reads that one again on
// its own (a GET) for its exact size. It also counts the pool's reservations and their addresses.
func objectSizes(ctx context.Context, c *cluster, rep *largeReport) error {
	hc, err := rest.HTTPClientFor(c.cfg)
	if err != nil {
		return err
	}
	base := strings.TrimSuffix(c.cfg.Host, "/") + "/apis/" + ipamv1.GroupVersion.String() + "/"
	start := time.Now()
	addrs := map[string]bool{}
	for _, kind := range []struct{ name, resource string }{
		{"IPPool", "ippools"}, {"IPPoolSlice", "ippoolslices"}, {"OverlappingRangeIPReservation", "overlappingrangeipreservations"},
	} {
		cont := ""
		for {
			body, err := get(ctx, hc, base+kind.resource+"?limit=5000&continue="+cont)
			if err != nil {
				return err
			}
			var page struct {
				Metadata struct {
					Continue string `json:"continue"`
				} `json:"metadata"`
				Items []json.RawMessage `json:"items"`
			}
			if err := json.Unmarshal(body, &page); err != nil {
				return fmt.Errorf("list %s: %w", kind.resource, err)
			}
			for _, raw := range page.Items {
				var obj struct {
					Metadata struct {
						Name   string            `json:"name"`
						Labels map[string]string `json:"labels"`
					} `json:"metadata"`
					Spec struct {
						Address string `json:"address"`
					} `json:"spec"`
				}
				if err := json.Unmarshal(raw, &obj); err != nil {
					return err
				}
				if len(raw) > rep.biggest[kind.name].bytes {
					rep.biggest[kind.name] = objSize{obj.Metadata.Name, len(raw)}
				}
				if kind.name == "OverlappingRangeIPReservation" && obj.Metadata.Labels[ipamv1.PoolLabel] == ipamv1.LabelValue(rep.pool) {
					rep.reservations++
					addrs[obj.Spec.Address] = true
				}
			}
			if cont = page.Metadata.Continue; cont == "" {
				break
			}
		}
		if b, ok := rep.biggest[kind.name]; ok {
			body, err := get(ctx, hc, base+kind.resource+"/"+b.name)
			if err != nil {
				return err
			}
			rep.biggest[kind.name] = objSize{b.name, max(b.bytes, len(body))}
		}
	}
	rep.distinct = len(addrs)
	rep.listWall = time.Since(start)
	return nil
}

func get(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body, err
}

func (r *largeReport) p50Ratio() float64 {
	return ratio(quantile(r.full.add, 0.5), quantile(r.empty.add, 0.5))
}

func (r *largeReport) p99Ratio() float64 {
	return ratio(quantile(r.full.add, 0.99), quantile(r.empty.add, 0.99))
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func (r *largeReport) failures() int {
	return r.warmUp.failures + r.empty.failures + r.full.failures
}

func (r *largeReport) duplicates() int {
	return r.warmUp.duplicates + r.empty.duplicates + r.full.duplicates
}

func (r *largeReport) sizesOK() bool {
	for _, k := range []string{"IPPool", "IPPoolSlice", "OverlappingRangeIPReservation"} {
		if b, ok := r.biggest[k]; !ok || b.bytes >= maxObject {
			return false
		}
	}
	return true
}

func (r *largeReport) passed(o options) bool {
	return r.failures() == 0 && r.duplicates() == 0 && r.leftAfterEmptyDELs == 0 &&
		r.reservations == o.largeCount && r.distinct == o.largeCount && r.sizesOK() &&
		r.p50Ratio() <= maxLatRatio && r.p99Ratio() <= maxLatRatio
}

func (r *largeReport) print(w io.Writer, o options) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	ok := func(b bool) string {
		if b {
			return "ok"
		}
		return "MISSED"
	}
	ms := func(d time.Duration) string {
		if d < 10*time.Millisecond {
			return d.Round(10 * time.Microsecond).String()
		}
		return d.Round(time.Millisecond).String()
	}
	pair := func(q float64, a, b []time.Duration) string {
		return ms(quantile(a, q)) + " / " + ms(quantile(b, q))
	}
	mib := func(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	n := o.largeCount
	fmt.Fprintf(tw, "measure (large pool: one node, %s)\tvalue\ttarget\t\n", o.largeRange)
	fmt.Fprintf(tw, "pool %s: capacity, blocks\t%d addresses, %d blocks of %d\t\t\n", r.pool, r.capacity, r.blocks, r.blockSize)
	fmt.Fprintf(tw, "fill: %d reservations + %d slices (%.0f%% of the blocks), warm process, %d goroutines\t%s (%.0f/s)\t\t\n",
		r.fillReservations, r.fillSlices, 100*float64(r.fillSlices)/float64(max(r.blocks, 1)), o.concurrency,
		r.fillWall.Round(100*time.Millisecond), float64(r.fillReservations+r.fillSlices)/r.fillWall.Seconds())
	fmt.Fprintf(tw, "agent start until serving (cache synced): empty / %d\t%s / %s\t\t\n", n, ms(r.empty.start), ms(r.full.start))
	fmt.Fprintf(tw, "ADD latency p50: empty / %d (%d plugin processes each, concurrency %d, after an unmeasured warm-up pass)\t%s\t\t\n",
		n, o.largeADDs, o.largeConcurrency, pair(0.5, r.empty.add, r.full.add))
	fmt.Fprintf(tw, "ADD latency p90: empty / %d\t%s\t\t\n", n, pair(0.9, r.empty.add, r.full.add))
	fmt.Fprintf(tw, "ADD latency p99: empty / %d\t%s\t\t\n", n, pair(0.99, r.empty.add, r.full.add))
	fmt.Fprintf(tw, "ADD latency max: empty / %d\t%s\t\t\n", n, pair(1, r.empty.add, r.full.add))
	fmt.Fprintf(tw, "first ADD after the agent's start: empty / %d\t%s / %s\t\t\n", n, ms(first(r.empty.add)), ms(first(r.full.add)))
	fmt.Fprintf(tw, "ADD latency p50 ratio, %d / empty\t%.2fx\t<= %.0fx\t%s\n", n, r.p50Ratio(), maxLatRatio, ok(r.p50Ratio() <= maxLatRatio))
	fmt.Fprintf(tw, "ADD latency p99 ratio, %d / empty\t%.2fx\t<= %.0fx\t%s\n", n, r.p99Ratio(), maxLatRatio, ok(r.p99Ratio() <= maxLatRatio))
	fmt.Fprintf(tw, "DEL latency p50: empty / %d\t%s\t\t\n", n, pair(0.5, r.empty.del, r.full.del))
	fmt.Fprintf(tw, "DEL latency p99: empty / %d\t%s\t\t\n", n, pair(0.99, r.empty.del, r.full.del))
	fmt.Fprintf(tw, "failures (ADD and DEL, warm-up pass included), duplicates\t%d, %d\t0\t%s\n", r.failures(), r.duplicates(),
		ok(r.failures() == 0 && r.duplicates() == 0))
	fmt.Fprintf(tw, "reservations left by the DELs before the fill\t%d\t0\t%s\n", r.leftAfterEmptyDELs, ok(r.leftAfterEmptyDELs == 0))
	fmt.Fprintf(tw, "reservations of the pool at the end (distinct addresses)\t%d (%d)\t%d\t%s\n", r.reservations, r.distinct, n,
		ok(r.reservations == n && r.distinct == n))
	for _, k := range []string{"IPPool", "IPPoolSlice", "OverlappingRangeIPReservation"} {
		b := r.biggest[k]
		fmt.Fprintf(tw, "largest %s (JSON from the API server: %s)\t%d B\t< %d KiB\t%s\n", k, b.name, b.bytes, maxObject>>10, ok(b.bytes > 0 && b.bytes < maxObject))
	}
	fmt.Fprintf(tw, "listing every object of the three kinds\t%s\t\t\n", r.listWall.Round(100*time.Millisecond))
	fmt.Fprintf(tw, "agent process memory, VmHWM / VmRSS (/proc): empty\t%s / %s\t\t\n", mib(r.empty.hwm), mib(r.empty.rss))
	fmt.Fprintf(tw, "agent process memory, VmHWM / VmRSS (/proc): %d cached\t%s / %s\t\t\n", n, mib(r.full.hwm), mib(r.full.rss))
	fmt.Fprintf(tw, "scenario wall time (%d cores; load average 1/5/15 min at its start: %s)\t%s\t\t\n",
		runtime.NumCPU(), r.loadAvg, r.wall.Round(time.Second))
	_ = tw.Flush()
	for _, f := range []string{r.warmUp.firstFailure, r.empty.firstFailure, r.full.firstFailure} {
		if f != "" {
			fmt.Fprintln(w, "first failure:", f)
		}
	}
}

// loadAvg returns the machine's load averages over 1, 5 and 15 minutes, as /proc/loadavg writes
// them.
func loadAvg() string {
	one, five, fifteen, err := benchproc.LoadAvg()
	if err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%.2f %.2f %.2f", one, five, fifteen)
}

func first(s []time.Duration) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[0]
}
