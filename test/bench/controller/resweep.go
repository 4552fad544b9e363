package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/netpool/netpool/test/bench/benchproc"
)

// sweepConfig is the controller's settings of one sweep: --gc-workers and --kube-api-qps (0: the
// controller's defaults).
type sweepConfig struct {
	workers int
	qps     float64
}

func (s sweepConfig) String() string {
	w, q := "default", "default"
	if s.workers > 0 {
		w = strconv.Itoa(s.workers)
	}
	if s.qps > 0 {
		q = strconv.FormatFloat(s.qps, 'g', -1, 64)
	}
	return fmt.Sprintf("--gc-workers %s, --kube-api-qps %s", w, q)
}

// parseSweeps reads -resweep: comma-separated WORKERS[:QPS], each a positive number.
func parseSweeps(s string) ([]sweepConfig, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []sweepConfig
	for _, item := range strings.Split(s, ",") {
		ws, qs, hasQPS := strings.Cut(strings.TrimSpace(item), ":")
		w, err := strconv.Atoi(ws)
		if err != nil || w < 1 {
			return nil, fmt.Errorf("%q: the workers must be a whole number, 1 or more", item)
		}
		sc := sweepConfig{workers: w}
		if hasQPS {
			if sc.qps, err = strconv.ParseFloat(qs, 64); err != nil || !(sc.qps > 0) || sc.qps > 1e6 {
				return nil, fmt.Errorf("%q: the QPS must be a number above 0, at most 1e6", item)
			}
		}
		out = append(out, sc)
	}
	return out, nil
}

// resweep stops the controller, recreates the leaked reservations (their pods are still deleted or
// finished), waits out the grace period and measures a cold sweep under sc.
func resweep(ctx context.Context, c *cluster, o options, w *workload, sc sweepConfig) (sweepResult, error) {
	res := sweepResult{config: sc}
	if err := c.stopController(); err != nil {
		return res, err
	}
	err := parallel(ctx, w.leaked, o.concurrency, func(i int) error {
		return c.client.Create(ctx, reservation(w.pods[i], w.addrs[i], nodeName(i%o.nodes)))
	})
	if err != nil {
		return res, fmt.Errorf("failed to recreate the leaked reservations: %w", err)
	}
	time.Sleep(o.grace + time.Second) // every recreated leak old enough to release, as after load
	so := o
	so.gcWorkers, so.qps = sc.workers, sc.qps
	if err := measureSweep(ctx, c, so, w, &res); err != nil {
		return res, err
	}
	p, err := benchproc.ReadProc(c.controller.cmd.Process.Pid)
	res.peakRSS = p.HWM
	return res, err
}
