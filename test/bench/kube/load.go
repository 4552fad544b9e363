package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/cni-plugin/agentproto"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/bench/fanout"
)

// report is what one run measured.
type report struct {
	ceilingRate  float64 // Creates per second from one warm process
	ceilingFails int
	addRate      float64 // ADDs per second through plugin processes and agents
	wall         time.Duration
	lat          []time.Duration
	failures     int
	firstFailure string
	duplicates   int // addresses handed to two attachments (plugin results)
	reservations int // reservations in the pool afterwards
	distinctAPI  int // distinct addresses among them
	coldADD      time.Duration
	// cpuCeiling and cpuADD are the CPU time each part used during the ceiling and the ADD run.
	cpuCeiling, cpuADD cpuSnapshot
	// socketRate is ADDs per second sent straight to the agents' sockets from this warm process,
	// and execRate plugin processes per second that only answer VERSION: the two halves of an ADD.
	socketRate, execRate float64
}

func run(ctx context.Context, o options) (*report, error) {
	c, err := startCluster(ctx, o, o.nodes)
	if c != nil {
		defer c.close(o.keep)
	}
	if err != nil {
		return nil, err
	}
	rep := &report{}
	// The API server's first IPPool write after it starts takes about 2 s (it readies the kind's
	// validation); an operator's first pool pays it once. Measure it, then keep it out of the run.
	start := time.Now()
	warm := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "bench-warm-up"}, Spec: ipamv1.IPPoolSpec{Range: "192.0.2.0/24"}}
	if err := c.client.Create(ctx, warm); err != nil {
		return nil, err
	}
	rep.coldADD = time.Since(start)
	var pids []int
	for _, a := range c.agents {
		pids = append(pids, a.cmd.Process.Pid)
	}
	before := takeCPU(pids)
	if err := ceiling(ctx, c, o, rep); err != nil {
		return nil, err
	}
	mid := takeCPU(pids)
	rep.cpuCeiling = mid.sub(before)
	if err := adds(ctx, c, o, rep); err != nil {
		return nil, err
	}
	rep.cpuADD = takeCPU(pids).sub(mid)
	if err := verify(ctx, c, o, rep); err != nil {
		return nil, err
	}
	if err := socketADDs(ctx, c, o, rep); err != nil {
		return nil, err
	}
	return rep, execFloor(ctx, c, o, rep)
}

// ceiling creates o.ceiling tiny reservations from this warm process, o.concurrency at a time.
func ceiling(ctx context.Context, c *cluster, o options, rep *report) error {
	var fails atomic.Int64
	start := time.Now()
	fanout.Each(o.ceiling, o.concurrency, func(i int) {
		// The API server admits a reservation only under its address's name: one address each,
		// counted up from 198.18.0.0 (the benchmarking range).
		a := netip.AddrFrom4([4]byte{198, 18 + byte(i>>16), byte(i >> 8), byte(i)})
		r := &ipamv1.OverlappingRangeIPReservation{
			ObjectMeta: metav1.ObjectMeta{Name: ipamv1.ReservationName("ceiling", a)},
			Spec: ipamv1.OverlappingRangeIPReservationSpec{Address: a.String(), Pool: "ceiling",
				ContainerID: fmt.Sprintf("c%d", i), IfName: "net1", Node: "ceiling"},
		}
		if err := c.client.Create(ctx, r); err != nil {
			fails.Add(1)
		}
	})
	rep.ceilingRate = float64(o.ceiling) / time.Since(start).Seconds()
	rep.ceilingFails = int(fails.Load())
	return nil
}

// adds runs o.adds plugin processes, o.concurrency at a time, attachment i on node i mod o.nodes.
func adds(ctx context.Context, c *cluster, o options, rep *report) error {
	var mu sync.Mutex
	held := map[string]int{}
	start := time.Now()
	fanout.Each(o.adds, o.concurrency, func(i int) {
		a := c.agents[i%len(c.agents)]
		t0 := time.Now()
		ip, err := pluginADD(ctx, c.plugin, a.socket, o.cidr, i)
		d := time.Since(t0)
		mu.Lock()
		defer mu.Unlock()
		rep.lat = append(rep.lat, d)
		if err != nil {
			rep.failures++
			if rep.firstFailure == "" {
				rep.firstFailure = err.Error()
			}
		} else {
			held[ip]++
			if held[ip] == 2 {
				rep.duplicates++
			}
		}
	})
	rep.wall = time.Since(start)
	rep.addRate = float64(o.adds) / rep.wall.Seconds()
	return nil
}

// pluginADD runs the netpool binary as a runtime does and returns the address it printed.
func pluginADD(ctx context.Context, bin, socket, cidr string, i int) (string, error) {
	return pluginCall(ctx, bin, "ADD", fmt.Sprintf("bench-%d", i), i, netConf("bench", cidr, socket))
}

// netConf is the network config of an inline pool served by the agent at socket.
func netConf(name, cidr, socket string) string {
	return fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"ipam":{"type":"netpool",`+
		`"range":%q,"datastore":"kubernetes","kubernetes":{"agent_socket":%q}}}`, name, cidr, socket)
}

// pluginCall runs the netpool binary for verb (ADD or DEL) of attachment id/net1 of pod bench/pod-i.
// ADD returns the address printed; DEL returns "".
func pluginCall(ctx context.Context, bin, verb, id string, i int, conf string) (string, error) {
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = []string{"CNI_COMMAND=" + verb, "CNI_CONTAINERID=" + id, "CNI_NETNS=/var/run/netns/" + id, "CNI_IFNAME=net1",
		"CNI_PATH=/opt/cni/bin", fmt.Sprintf("CNI_ARGS=K8S_POD_NAMESPACE=bench;K8S_POD_NAME=pod-%d;K8S_POD_UID=uid-%d", i, i)}
	cmd.Stdin = strings.NewReader(conf)
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	if verb == "DEL" && err == nil {
		return "", nil
	}
	var res struct {
		IPs  []struct{ Address string } `json:"ips"`
		Code int                        `json:"code"`
		Msg  string                     `json:"msg"`
	}
	if jerr := json.Unmarshal(out.Bytes(), &res); jerr != nil {
		return "", fmt.Errorf("%s %s: %v, output %q", verb, id, err, out.String())
	}
	if err != nil || len(res.IPs) == 0 {
		return "", fmt.Errorf("%s %s: code %d: %s", verb, id, res.Code, res.Msg)
	}
	ip, _, _ := strings.Cut(res.IPs[0].Address, "/")
	return ip, nil
}

// verify counts the pool's reservations and their distinct addresses on the API server.
func verify(ctx context.Context, c *cluster, o options, rep *report) error {
	var list ipamv1.OverlappingRangeIPReservationList
	pool := ipamv1.PoolName("", netip.MustParsePrefix(o.cidr))
	if err := c.client.List(ctx, &list, client.MatchingLabels{ipamv1.PoolLabel: pool}); err != nil {
		return err
	}
	addrs := map[string]bool{}
	for _, r := range list.Items {
		addrs[r.Spec.Address] = true
	}
	rep.reservations, rep.distinctAPI = len(list.Items), len(addrs)
	return nil
}

// socketADDs sends o.adds ADDs straight to the agents' sockets (the plugin's request, without the
// plugin process) into a second pool, o.concurrency at a time.
func socketADDs(ctx context.Context, c *cluster, o options, rep *report) error {
	var fails atomic.Int64
	start := time.Now()
	fanout.Each(o.adds, o.concurrency, func(i int) {
		a := c.agents[i%len(c.agents)]
		req := &agentproto.Request{Verb: agentproto.VerbAdd, ContainerID: fmt.Sprintf("socket-%d", i), IfName: "net1",
			Stdin: fmt.Appendf(nil, `{"cniVersion":"1.1.0","name":"bench","ipam":{"type":"netpool","range":"10.201.0.0/20",`+
				`"datastore":"kubernetes","kubernetes":{"agent_socket":%q}}}`, a.socket)}
		resp, err := agentproto.Call(ctx, a.socket, req)
		if err != nil || resp.Error != nil {
			fails.Add(1)
		}
	})
	rep.socketRate = float64(o.adds) / time.Since(start).Seconds()
	if n := fails.Load(); n > 0 {
		return fmt.Errorf("%d ADDs sent to the sockets failed", n)
	}
	return nil
}

// execFloor runs o.adds plugin processes that answer VERSION only, o.concurrency at a time: the
// cost of starting the plugin, which every design that execs it per ADD pays.
func execFloor(ctx context.Context, c *cluster, o options, rep *report) error {
	var fails atomic.Int64
	start := time.Now()
	fanout.Each(o.adds, o.concurrency, func(int) {
		cmd := exec.CommandContext(ctx, c.plugin)
		cmd.Env = []string{"CNI_COMMAND=VERSION"}
		cmd.Stdin = strings.NewReader(`{"cniVersion":"1.1.0"}`)
		if err := cmd.Run(); err != nil {
			fails.Add(1)
		}
	})
	rep.execRate = float64(o.adds) / time.Since(start).Seconds()
	if n := fails.Load(); n > 0 {
		return fmt.Errorf("%d VERSION calls failed", n)
	}
	return nil
}

func quantile(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	return sorted[min(max(int(math.Ceil(q*float64(len(sorted))))-1, 0), len(sorted)-1)]
}

func (r *report) ratio() float64 { return r.addRate / r.ceilingRate }

func (r *report) passed(o options) bool {
	return r.failures == 0 && r.duplicates == 0 && r.ceilingFails == 0 && r.reservations == o.adds &&
		r.distinctAPI == o.adds && r.ratio() >= o.minRatio && quantile(r.lat, 0.99) < o.maxP99
}

func (r *report) print(w io.Writer, o options) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	ok := func(b bool) string {
		if b {
			return "ok"
		}
		return "MISSED"
	}
	p50, p99 := quantile(r.lat, 0.5), quantile(r.lat, 0.99)
	fmt.Fprintf(tw, "measure\tvalue\ttarget\t\n")
	fmt.Fprintf(tw, "raw ceiling (warm process, %d Creates, %d goroutines)\t%.0f/s\t\t\n", o.ceiling, o.concurrency, r.ceilingRate)
	fmt.Fprintf(tw, "ADDs (%d plugin processes, %d agents, concurrency %d, %s)\t%.0f/s in %s\t\t\n",
		o.adds, o.nodes, o.concurrency, o.cidr, r.addRate, r.wall.Round(time.Millisecond))
	fmt.Fprintf(tw, "ADD throughput / ceiling\t%.0f%%\t>= %.0f%%\t%s\n", 100*r.ratio(), 100*o.minRatio, ok(r.ratio() >= o.minRatio))
	fmt.Fprintf(tw, "ADD latency p50\t%s\t\t\n", p50.Round(time.Millisecond))
	fmt.Fprintf(tw, "ADD latency p99\t%s\t< %s\t%s\n", p99.Round(time.Millisecond), o.maxP99, ok(p99 < o.maxP99))
	fmt.Fprintf(tw, "ADD latency max\t%s\t\t\n", quantile(r.lat, 1).Round(time.Millisecond))
	fmt.Fprintf(tw, "failures\t%d\t0\t%s\n", r.failures+r.ceilingFails, ok(r.failures+r.ceilingFails == 0))
	fmt.Fprintf(tw, "duplicates (results / API server)\t%d / %d\t0\t%s\n", r.duplicates, r.reservations-r.distinctAPI,
		ok(r.duplicates == 0 && r.distinctAPI == r.reservations))
	fmt.Fprintf(tw, "reservations in the pool\t%d\t%d\t%s\n", r.reservations, o.adds, ok(r.reservations == o.adds))
	fmt.Fprintf(tw, "first IPPool write after apiserver start (excluded)\t%s\t\t\n", r.coldADD.Round(time.Millisecond))
	fmt.Fprintf(tw, "ADDs sent straight to the agents' sockets (no plugin process)\t%.0f/s\t\t\n", r.socketRate)
	fmt.Fprintf(tw, "plugin processes answering VERSION only (start-up floor)\t%.0f/s\t\t\n", r.execRate)
	per := func(d time.Duration, n int) string {
		return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000/float64(n))
	}
	fmt.Fprintf(tw, "CPU per ceiling Create: apiserver+etcd / client\t%s / %s\t\t\n",
		per(r.cpuCeiling.controlPlane, o.ceiling), per(r.cpuCeiling.bench, o.ceiling))
	fmt.Fprintf(tw, "CPU per ADD: apiserver+etcd / agents / plugin process\t%s / %s / %s\t\t\n",
		per(r.cpuADD.controlPlane, o.adds), per(r.cpuADD.agents, o.adds), per(r.cpuADD.plugins, o.adds))
	fmt.Fprintf(tw, "CPU used during the ADD run / available (%d cores)\t%.1f s / %.1f s\t\t\n", runtime.NumCPU(),
		r.cpuADD.total().Seconds(), r.wall.Seconds()*float64(runtime.NumCPU()))
	_ = tw.Flush()
	if r.firstFailure != "" {
		fmt.Fprintln(w, "first failure:", r.firstFailure)
	}
}
