package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// measureLatency deletes o.deletions live pods at o.rate per minute while the controller runs and
// times each release: from the pod's Delete returning to the reservation's deletion seen on a
// watch.
func measureLatency(ctx context.Context, c *cluster, o options, w *workload, rep *report) error {
	var list ipamv1.OverlappingRangeIPReservationList
	if err := c.client.List(ctx, &list, client.Limit(1)); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watcher, err := c.client.Watch(wctx, &ipamv1.OverlappingRangeIPReservationList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		return err
	}
	defer watcher.Stop()

	var mu sync.Mutex
	deletedAt := map[string]time.Time{}
	releasedAt := map[string]time.Time{}
	go func() {
		for ev := range watcher.ResultChan() {
			r, ok := ev.Object.(*ipamv1.OverlappingRangeIPReservation)
			if ev.Type != watch.Deleted || !ok {
				continue
			}
			mu.Lock()
			releasedAt[r.Name] = time.Now()
			mu.Unlock()
		}
	}()

	interval := time.Minute / time.Duration(o.rate)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	first := w.leaked
	for i := first; i < first+o.deletions; i++ {
		<-tick.C
		if err := c.client.Delete(ctx, w.pods[i], client.GracePeriodSeconds(0)); err != nil {
			return fmt.Errorf("failed to delete pod %s: %w", w.pods[i].Name, err)
		}
		w.deletedLive++
		mu.Lock()
		deletedAt[w.reservations[i]] = time.Now()
		mu.Unlock()
	}
	deadline := time.Now().Add(o.grace + 30*time.Second)
	for {
		mu.Lock()
		done := len(releasedAt) >= o.deletions
		mu.Unlock()
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for name, t0 := range deletedAt {
		t1, ok := releasedAt[name]
		if !ok {
			rep.latencyMissed++
			continue
		}
		rep.latencies = append(rep.latencies, t1.Sub(t0))
	}
	slices.Sort(rep.latencies)
	rep.deletionRate = o.rate
	return nil
}
