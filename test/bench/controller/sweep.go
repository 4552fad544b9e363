package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// sweepTimeout bounds the wait for the sweep; a miss is reported, not waited for forever.
const sweepTimeout = 5 * time.Minute

// readyTimeout bounds the controller's cold start: at 150,000 pods on a loaded machine its caches
// took 57-68 s to sync.
const readyTimeout = 3 * time.Minute

// measureSweep starts the controller cold and times its readiness and the release of every leak,
// then checks that exactly the leaks went.
func measureSweep(ctx context.Context, c *cluster, o options, w *workload, rep *sweepResult) error {
	if err := c.startController(o); err != nil {
		return err
	}
	p := c.controller
	if err := p.waitReady(readyTimeout); err != nil {
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
	present, err := reservationNames(ctx, c)
	if err != nil {
		return err
	}
	rep.leaksLeft, rep.liveReleased = judgeSweep(w.reservations, w.leaked, w.deletedLive, present)
	return nil
}

// reservationNames lists the names of every reservation, paged, metadata only: one LIST instead
// of a GET per reservation (150,000 serial GETs took minutes on a loaded machine).
func reservationNames(ctx context.Context, c *cluster) (map[string]bool, error) {
	present := map[string]bool{}
	for cont := ""; ; {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(ipamv1.GroupVersion.WithKind("OverlappingRangeIPReservationList"))
		if err := c.client.List(ctx, list, client.Limit(10000), client.Continue(cont)); err != nil {
			return nil, fmt.Errorf("failed to list the reservations: %w", err)
		}
		for _, o := range list.Items {
			present[o.Name] = true
		}
		if cont = list.Continue; cont == "" {
			return present, nil
		}
	}
}

// judgeSweep compares what is left with the workload: attachments [0, leaked) must be gone,
// [leaked, leaked+deletedLive) went with the latency measurement, every other must remain.
func judgeSweep(reservations []string, leaked, deletedLive int, present map[string]bool) (leaksLeft, liveReleased int) {
	for i, name := range reservations {
		switch {
		case i < leaked && present[name]:
			leaksLeft++
		case i >= leaked+deletedLive && !present[name]:
			liveReleased++
		}
	}
	return leaksLeft, liveReleased
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
