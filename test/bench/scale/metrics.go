package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/netpool/netpool/test/bench/benchproc"
)

// series is one scrape of a Prometheus text endpoint: each sample by its name and labels
// (`name{a="x",b="y"}`, labels sorted as the endpoint writes them).
type series map[string]float64

// sum adds the samples of metric name whose labels include every pair of want.
func (s series) sum(name string, want ...string) float64 {
	total := 0.0
	for k, v := range s {
		metric, labels, _ := strings.Cut(k, "{")
		if metric != name {
			continue
		}
		ok := true
		for i := 0; i+1 < len(want); i += 2 {
			if !strings.Contains(","+labels, ","+want[i]+`="`+want[i+1]+`"`) {
				ok = false
				break
			}
		}
		if ok {
			total += v
		}
	}
	return total
}

// kept are the metrics a snapshot keeps: the API server's and etcd's endpoints write thousands of
// samples, and the bench's own heap is part of what it measures.
var kept = []string{"apiserver_request_total{", "apiserver_watch_events_total{", "apiserver_watch_events_sizes_sum{",
	"apiserver_flowcontrol_rejected_requests_total{", "apiserver_terminated_watchers_total{", "etcd_mvcc_db_total_size_in_use_in_bytes"}

// parseSeries reads the Prometheus text format, keeping the samples of the kept metrics.
func parseSeries(r io.Reader) (series, error) {
	out := series{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] == '#' || !slices.ContainsFunc(kept, func(k string) bool { return bytes.HasPrefix(line, []byte(k)) }) {
			continue
		}
		i := bytes.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("metrics line %q has no value", line)
		}
		v, err := strconv.ParseFloat(string(line[i+1:]), 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out[string(line[:i])] = v
	}
	return out, sc.Err()
}

// scrape reads url's /metrics with client.
func scrape(ctx context.Context, client *http.Client, url string) (series, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }() // read-only
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseSeries(resp.Body)
}

// readProc reads what /proc tells of pid; a process that is gone reads as zero, which the tables
// show.
func readProc(pid int) benchproc.Proc {
	p, _ := benchproc.ReadProc(pid)
	return p
}

// snapshot is the state of the run's processes and the API server's and etcd's counters at one
// moment; phases are the differences of two.
type snapshot struct {
	at                   time.Time
	apiserver, etcd, me  benchproc.Proc
	controller           benchproc.Proc
	api, etcdMetrics     series
	load1, load5, load15 float64
}

// sampler takes snapshots of one cluster.
type sampler struct {
	c       *cluster
	http    *http.Client // the admin's, for the API server's /metrics
	apiPID  int
	etcdPID int
}

func newSampler(c *cluster) (*sampler, error) {
	hc, err := rest.HTTPClientFor(c.cfg)
	if err != nil {
		return nil, err
	}
	s := &sampler{c: c, http: hc}
	s.apiPID, s.etcdPID = c.processes()
	if s.apiPID == 0 || s.etcdPID == 0 {
		return nil, fmt.Errorf("kube-apiserver (%d) or etcd (%d) not found among this process's children", s.apiPID, s.etcdPID)
	}
	return s, nil
}

func (s *sampler) take(ctx context.Context) (snapshot, error) {
	sn := snapshot{at: time.Now(), apiserver: readProc(s.apiPID), etcd: readProc(s.etcdPID), me: readProc(os.Getpid())}
	if s.c.controller != nil {
		sn.controller = readProc(s.c.controller.Process.Pid)
	}
	var err error
	if sn.api, err = scrape(ctx, s.http, strings.TrimSuffix(s.c.cfg.Host, "/")+"/metrics"); err != nil {
		return sn, fmt.Errorf("API server metrics: %w", err)
	}
	if sn.etcdMetrics, err = scrape(ctx, http.DefaultClient, strings.TrimSuffix(s.c.etcdURL(), "/")+"/metrics"); err != nil {
		return sn, fmt.Errorf("etcd metrics: %w", err)
	}
	sn.load1, sn.load5, sn.load15, _ = benchproc.LoadAvg() // zero when unreadable: the tables show the load, the targets ignore it
	return sn, nil
}

// liveHeap is the bench process's live heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// memAvailable is MemAvailable of /proc/meminfo, in bytes.
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "MemAvailable:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cpuProfile writes a CPU profile of the API server over d to path (its /debug/pprof, open to the
// admin).
func (s *sampler) cpuProfile(ctx context.Context, path string, d time.Duration) error {
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(s.c.cfg.Host, "/"), int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return fmt.Errorf("API server profile: %w", err)
	}
	defer func() { _ = resp.Body.Close() }() // read-only
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("API server profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
