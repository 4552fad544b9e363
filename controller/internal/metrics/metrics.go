// Package metrics holds netpool's own controller metrics, which the reconcilers update and the
// manager registers.
package metrics

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are netpool's own metrics; controller-runtime adds its reconcile counts, errors and
// latencies (controller_runtime_reconcile_*) and workqueue metrics on the same /metrics.
type Metrics struct {
	// PoolCapacity, PoolAllocated and PoolFree mirror each IPPool's status, by pool.
	PoolCapacity  *prometheus.GaugeVec
	PoolAllocated *prometheus.GaugeVec
	PoolFree      *prometheus.GaugeVec
	// Releases counts reservations released (or, with dry_run="true", found and left), by reason.
	Releases *prometheus.CounterVec
	// SlicesReturned counts slices given back to their pool, by reason.
	SlicesReturned *prometheus.CounterVec
	// Sweeps counts the periodic sweeps that queued every reservation.
	Sweeps prometheus.Counter
	// UsersRemoved counts the users whose pods were gone that the GC removed from persistently
	// owned reservations (a finished migration's source).
	UsersRemoved prometheus.Counter
}

// New creates the metrics and registers them with reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		PoolCapacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "netpool_pool_capacity_addresses",
			Help: "Addresses an IPPool can hand out (its status.capacity).",
		}, []string{"pool"}),
		PoolAllocated: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "netpool_pool_allocated_addresses",
			Help: "Reservations held in an IPPool (its status.allocated).",
		}, []string{"pool"}),
		PoolFree: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "netpool_pool_free_addresses",
			Help: "Addresses of an IPPool still free (its status.free).",
		}, []string{"pool"}),
		Releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "netpool_gc_releases_total",
			Help: "Leaked reservations released by the controller, by reason; dry_run=\"true\" counts those a dry run found and left.",
		}, []string{"reason", "dry_run"}),
		SlicesReturned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "netpool_slices_returned_total",
			Help: "IPPoolSlices given back to their pool, by reason (NodeDeleted, SliceEmpty).",
		}, []string{"reason"}),
		Sweeps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "netpool_gc_sweeps_total",
			Help: "Periodic sweeps that queued every reservation for GC.",
		}),
		UsersRemoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "netpool_gc_users_removed_total",
			Help: "Users whose pods were gone that the GC removed from persistently owned reservations.",
		}),
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.PoolCapacity, m.PoolAllocated, m.PoolFree, m.Releases, m.SlicesReturned, m.Sweeps, m.UsersRemoved} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("failed to register the controller's metrics: %w", err)
	}
	return m, nil
}

// SetPool records one pool's counts. An IPv6 pool's capacity exceeds what a float64 holds
// exactly; the gauge then carries the nearest value.
func (m *Metrics) SetPool(pool string, capacity *big.Int, allocated int64, free *big.Int) {
	m.PoolCapacity.WithLabelValues(pool).Set(bigFloat(capacity))
	m.PoolAllocated.WithLabelValues(pool).Set(float64(allocated))
	m.PoolFree.WithLabelValues(pool).Set(bigFloat(free))
}

// ForgetPool drops a deleted pool's series.
func (m *Metrics) ForgetPool(pool string) {
	m.PoolCapacity.DeleteLabelValues(pool)
	m.PoolAllocated.DeleteLabelValues(pool)
	m.PoolFree.DeleteLabelValues(pool)
}

// Released counts one release (or, in a dry run, one leak found).
func (m *Metrics) Released(reason string, dryRun bool) {
	m.Releases.WithLabelValues(reason, strconv.FormatBool(dryRun)).Inc()
}

func bigFloat(n *big.Int) float64 {
	f, _ := new(big.Float).SetInt(n).Float64() // the nearest float64; exactness is not needed in a gauge
	return f
}
