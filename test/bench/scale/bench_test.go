package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseSeries(t *testing.T) {
	text := `# HELP apiserver_request_total Counter
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",resource="ippoolslices",verb="POST"} 7
apiserver_request_total{code="409",resource="ippoolslices",verb="POST"} 2
apiserver_request_total{code="201",resource="overlappingrangeipreservations",verb="POST"} 1e+03
go_goroutines 1234
etcd_mvcc_db_total_size_in_use_in_bytes 4.096e+06
`
	s, err := parseSeries(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.sum("apiserver_request_total", "resource", "ippoolslices", "verb", "POST"); got != 9 {
		t.Errorf("slice POSTs = %g, want 9", got)
	}
	if got := s.sum("apiserver_request_total", "code", "201"); got != 1007 {
		t.Errorf("201s = %g, want 1007", got)
	}
	if got := s.sum("etcd_mvcc_db_total_size_in_use_in_bytes"); got != 4096000 {
		t.Errorf("db = %g", got)
	}
	if _, kept := s["go_goroutines"]; kept || len(s) != 4 {
		t.Errorf("kept %v, want only the bench's metrics", s)
	}
	if _, err := parseSeries(strings.NewReader("apiserver_request_total{verb=\"GET\"}\n")); err == nil {
		t.Error("a sample without a value parsed")
	}
	if _, err := parseSeries(strings.NewReader("apiserver_request_total{verb=\"GET\"} x\n")); err == nil {
		t.Error("a sample with a bad value parsed")
	}
}

func TestLabel(t *testing.T) {
	labels := `code="201",resource="ippools",subresource="status",verb="PATCH"}`
	for name, want := range map[string]string{"code": "201", "resource": "ippools", "verb": "PATCH", "source": "", "x": ""} {
		if got := label(labels, name); got != want {
			t.Errorf("label %s = %q, want %q", name, got, want)
		}
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if p := percentile(ds, 0.5); p != 50*time.Millisecond {
		t.Errorf("p50 = %s", p)
	}
	if p := percentile(ds, 0.99); p != 99*time.Millisecond {
		t.Errorf("p99 = %s", p)
	}
	if p := percentile(ds, 1); p != 100*time.Millisecond {
		t.Errorf("max = %s", p)
	}
	if p := percentile(nil, 0.99); p != 0 {
		t.Errorf("p99 of nothing = %s", p)
	}
}

func TestValidate(t *testing.T) {
	good := options{nodes: 100, pods: 30, density: 110, parallel: 200, raw: 1000, statusInterval: time.Second, statusFanout: -1}
	if err := good.validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*options){
		"one node":        func(o *options) { o.nodes = 1 },
		"no pods":         func(o *options) { o.pods = 0 },
		"no parallel":     func(o *options) { o.parallel = 0 },
		"negative rate":   func(o *options) { o.rate = -1 },
		"too many raw":    func(o *options) { o.raw = 70000 },
		"status interval": func(o *options) { o.statusInterval = 0 },
		"status fanout":   func(o *options) { o.statusFanout = -2 },
	} {
		o := good
		mut(&o)
		if err := o.validate(); err == nil {
			t.Errorf("%s: validated", name)
		}
	}
}

func TestRefusals(t *testing.T) {
	before := snapshot{api: series{
		`apiserver_flowcontrol_rejected_requests_total{flow_schema="netpool-agent",priority_level="netpool-agent",reason="time-out"}`: 5,
	}}
	after := snapshot{api: series{
		`apiserver_flowcontrol_rejected_requests_total{flow_schema="netpool-agent",priority_level="netpool-agent",reason="time-out"}`:     12,
		`apiserver_flowcontrol_rejected_requests_total{flow_schema="service-accounts",priority_level="workload-low",reason="queue-full"}`: 3,
		`apiserver_request_total{code="429",resource="nodes",verb="WATCH"}`:                                                               10,
	}}
	if got, want := refusals(before, after), "netpool-agent time-out 7, workload-low queue-full 3"; got != want {
		t.Errorf("refusals = %q, want %q", got, want)
	}
	if got := refusals(after, after); got != "none" {
		t.Errorf("refusals without new ones = %q, want none", got)
	}
}

func TestClosedWatches(t *testing.T) {
	before := snapshot{api: series{
		`apiserver_terminated_watchers_total{group="ipam.netpool.io",resource="overlappingrangeipreservations"}`: 100,
	}}
	after := snapshot{api: series{
		`apiserver_terminated_watchers_total{group="ipam.netpool.io",resource="overlappingrangeipreservations"}`: 4100,
		`apiserver_terminated_watchers_total{group="ipam.netpool.io",resource="ippoolslices"}`:                   7,
		`apiserver_flowcontrol_rejected_requests_total{priority_level="x",reason="time-out"}`:                    3,
	}}
	if got, want := closedWatches(before, after), "ippoolslices 7, overlappingrangeipreservations 4e+03"; got != want {
		t.Errorf("closedWatches = %q, want %q", got, want)
	}
}

func TestAPIRequests(t *testing.T) {
	before := snapshot{api: series{
		`apiserver_request_total{code="201",resource="overlappingrangeipreservations",verb="POST"}`: 10,
	}}
	after := snapshot{api: series{
		`apiserver_request_total{code="201",resource="overlappingrangeipreservations",verb="POST"}`: 30,
		`apiserver_request_total{code="409",resource="overlappingrangeipreservations",verb="POST"}`: 10,
		`apiserver_request_total{code="200",resource="ippools",verb="WATCH"}`:                       50,
		`apiserver_request_total{code="200",resource="",verb="GET"}`:                                5,
	}}
	if got, want := apiRequests(before, after, 10), "POST overlappingrangeipreservations 3"; got != want {
		t.Errorf("apiRequests = %q, want %q", got, want)
	}
}
