package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/test/bench/fanout"
)

// deliveryWait bounds the wait for the watched baseline's events; fewer received than created is
// reported beside the figure.
const deliveryWait = 30 * time.Second

// deliveryStall ends the wait early when no event has come for this long.
const deliveryStall = time.Second

// The watched baseline: the raw Create of the tiny custom resource while one watch of it per
// hollow node is open, each selecting its node's label, as every agent watches its reservations.
// The API server's watch cache keeps no index of a custom resource's labels (only built-in kinds
// register trigger fields, such as a pod's spec.nodeName), so every event it dispatches is offered
// to all N watchers and each filters it: the unavoidable cost of N label-selected watches, which
// the unwatched baseline does not pay and an ADD does. An ADD's CPU against this baseline is what
// netpool adds over it.

// benchNodeLabel is the label the watched baseline's objects carry and its watches select.
const benchNodeLabel = "bench.netpool.io/node"

var benchObjects = schema.GroupVersionResource{Group: "bench.netpool.io", Version: "v1", Resource: "benchobjects"}

// watchedObject is the watched baseline's object i: the tiny custom resource labelled with one of
// nodes, in turn, so that every Create matches exactly one of the N watches.
func watchedObject(nodes []string) func(int) client.Object {
	return func(i int) client.Object {
		o := benchObject(i)
		o.SetName(fmt.Sprintf("watched-%d", i))
		o.SetLabels(map[string]string{benchNodeLabel: nodes[i%len(nodes)]})
		return o
	}
}

// nodeWatches are open watches of the tiny custom resource, one per node's label, each counting
// what it receives.
type nodeWatches struct {
	ws       []watch.Interface
	received atomic.Int64 // ADDED events
	ended    atomic.Int64 // watches the API server ended before stop
	stopping atomic.Bool
	wg       sync.WaitGroup
}

// openNodeWatches opens one watch per node, each selecting that node's label, from the current
// resource version, and returns once the API server has registered every one of them (a watch's
// answer begins only after its watcher is registered).
func openNodeWatches(ctx context.Context, c *cluster, nodes []string) (*nodeWatches, error) {
	dc, err := dynamic.NewForConfig(c.cfg)
	if err != nil {
		return nil, err
	}
	nw := &nodeWatches{ws: make([]watch.Interface, len(nodes))}
	var mu sync.Mutex
	var first error
	fanout.Each(len(nodes), 50, func(i int) {
		// From the watch cache's current state ("0"): a resource version read from etcd may be
		// ahead of this kind's cache, and a watch from it can end with "too large resource
		// version" before any Create. No object carries the label yet, so none comes at start.
		w, err := dc.Resource(benchObjects).Watch(ctx, metav1.ListOptions{
			LabelSelector: benchNodeLabel + "=" + nodes[i], ResourceVersion: "0"})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if first == nil {
				first = fmt.Errorf("failed to watch the bench objects of %s: %w", nodes[i], err)
			}
			return
		}
		nw.ws[i] = w
		nw.wg.Go(func() {
			for ev := range w.ResultChan() {
				if ev.Type == watch.Added {
					nw.received.Add(1)
				}
			}
			if !nw.stopping.Load() {
				nw.ended.Add(1)
			}
		})
	})
	if first != nil {
		nw.stop()
		return nil, first
	}
	return nw, nil
}

// stop closes every watch and waits for their readers.
func (nw *nodeWatches) stop() {
	nw.stopping.Store(true)
	for _, w := range nw.ws {
		if w != nil {
			w.Stop()
		}
	}
	nw.wg.Wait()
}

// watchedCreates is rawCreates of the watched baseline: n Creates, each delivered to one of the
// N open watches and offered to all of them. It records how many events the watches received.
func watchedCreates(ctx context.Context, c *cluster, s *sampler, n, parallel int, nodes []string) (*baseline, error) {
	nw, err := openNodeWatches(ctx, c, nodes)
	if err != nil {
		return nil, err
	}
	defer nw.stop()
	name := fmt.Sprintf("raw Create of the tiny custom resource under %d label-selected watches of it (one per node)", len(nodes))
	// The after snapshot waits for the deliveries (the API server dispatches an event after its
	// Create has answered), but not for one that will not come: the API server closes a watch
	// that falls behind, and a wait would add idle CPU to the baseline.
	delivered := func() {
		last, lastAt := nw.received.Load(), time.Now()
		for deadline := time.Now().Add(deliveryWait); last < int64(n) && time.Now().Before(deadline) && time.Since(lastAt) < deliveryStall; {
			time.Sleep(10 * time.Millisecond)
			if now := nw.received.Load(); now != last {
				last, lastAt = now, time.Now()
			}
		}
	}
	b, err := rawCreates(ctx, c, s, name, n, parallel, watchedObject(nodes), delivered)
	if err != nil {
		return nil, err
	}
	b.short = fmt.Sprintf("CR under %d watches", len(nodes))
	b.watches = len(nodes)
	b.delivered = int(nw.received.Load())
	b.watchesEnded = int(nw.ended.Load())
	return b, nil
}
