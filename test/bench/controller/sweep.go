package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// sweepTimeout bounds the wait for the sweep; a miss is reported, not waited for forever.
const sweepTimeout = 5 * time.Minute

// measureSweep starts the controller cold and times its readiness and the release of every leak,
// then checks that exactly the leaks went.
func measureSweep(ctx context.Context, c *cluster, o options, w *workload, rep *sweepResult) error {
	if err := c.startController(o); err != nil {
		return err
	}
	p := c.controller
	if err := p.waitReady(time.Minute); err != nil {
		return err
	}
	rep.ready = time.Since(p.started)
	deadline := p.started.Add(sweepTimeout)
	for {
		n, err := releases(p.metrics)
		if err != nil {
			return err
		}
		if n >= w.leaked {
			rep.sweep = time.Since(p.started)
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d leaks released within %s (log: %s)", n, w.leaked, sweepTimeout, p.log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	for i, name := range w.reservations {
		err := c.client.Get(ctx, client.ObjectKey{Name: name}, &ipamv1.OverlappingRangeIPReservation{})
		switch {
		case i < w.leaked && err == nil:
			rep.leaksLeft++
		case i >= w.leaked+w.deletedLive && apierrors.IsNotFound(err):
			rep.liveReleased++
		case err != nil && !apierrors.IsNotFound(err):
			return err
		}
	}
	return nil
}

// releases reads the controller's /metrics: the releases made so far (dry runs excluded).
func releases(metricsAddr string) (int, error) {
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }() // read-only; a short read shows as a parse error
	total := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "netpool_gc_releases_total{") || !strings.Contains(line, `dry_run="false"`) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metrics line %q: %w", line, err)
		}
		total += v
	}
	return int(total), sc.Err()
}
