package poolstatus

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// Every agent watches IPPools, because it needs their specs, so each status write of a pool is
// delivered to every node: a write per second while addresses change costs N watch events per
// second per pool. At 2,000 nodes that was 1.28 million of the 1.52 million events the API server
// sent for 60,000 ADDs (docs/scale.md). The status is for people and netpoolctl, not for the
// agents' allocations, so its cadence stretches with the cluster: a pool's status is written at
// most once per Interval and at most Fanout deliveries a second, counting one delivery per node.

// DefaultFanout is how many status deliveries a second one pool may cost the cluster's agents
// together: below 200 nodes the interval alone decides; at 2,000 nodes a pool's status is written
// at most every 10 s, at 5,000 every 25 s.
const DefaultFanout = 200

// writeInterval is the shortest time between two status writes of one pool in a cluster of nodes
// nodes: interval, stretched so that nodes deliveries per write cost at most fanout a second.
// fanout <= 0 leaves interval alone.
func writeInterval(interval time.Duration, fanout float64, nodes int) time.Duration {
	if fanout <= 0 || nodes <= 0 {
		return interval
	}
	if stretched := time.Duration(float64(nodes) / fanout * float64(time.Second)); stretched > interval {
		return stretched
	}
	return interval
}

// nodeCounter counts the cluster's Nodes from the manager's Node informer (the node reconciler
// watches Nodes anyway, so this adds a handler, not a watch).
type nodeCounter struct{ n atomic.Int64 }

func (c *nodeCounter) count() int { return int(c.n.Load()) }

// countNodes registers a counter on the Node informer of informers.
func countNodes(ctx context.Context, informers cache.Informers) (*nodeCounter, error) {
	inf, err := informers.GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return nil, fmt.Errorf("pool status: the Node informer: %w", err)
	}
	c := &nodeCounter{}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.n.Add(1) },
		DeleteFunc: func(any) { c.n.Add(-1) },
	})
	if err != nil {
		return nil, fmt.Errorf("pool status: counting Nodes: %w", err)
	}
	return c, nil
}
