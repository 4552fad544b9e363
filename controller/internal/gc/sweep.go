package gc

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/netpool/netpool/controller/internal/metrics"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// sweepSource queues every cached reservation for the GC every interval, for what no event
// announced: a pod deleted while its reservation was not yet in the cache, a recheck lost with a
// restart. The sweep at start is the reservations' initial list, so the first tick comes after
// one interval. The queue collapses a reservation queued twice.
func sweepSource(c client.Reader, interval time.Duration, m *metrics.Metrics) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		go func() {
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				n, err := sweep(ctx, c, q)
				if err != nil {
					logf.FromContext(ctx).Error(err, "Sweeping reservations failed; trying again at the next interval")
					continue
				}
				m.Sweeps.Inc()
				logf.FromContext(ctx).Info("Swept reservations", "queued", n)
			}
		}()
		return nil
	})
}

// sweep queues every reservation in c and returns how many it queued.
func sweep(ctx context.Context, c client.Reader, q workqueue.TypedInterface[reconcile.Request]) (int, error) {
	var list ipamv1.OverlappingRangeIPReservationList
	if err := c.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return 0, fmt.Errorf("failed to list reservations: %w", err)
	}
	for i := range list.Items {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
	}
	return len(list.Items), nil
}
