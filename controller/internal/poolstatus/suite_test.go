package poolstatus

import (
	"os"
	"testing"

	"github.com/netpool/netpool/controller/internal/clock"
	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/test/envtest"
)

func TestMain(m *testing.M) { os.Exit(envtest.RunShared(m.Run)) }

// startManager runs the pool status reconciler with opts in a manager of the test.
func startManager(t *testing.T, opts ctrltest.Options) *ctrltest.Manager {
	t.Helper()
	return ctrltest.StartManager(t, nil, opts, func(d ctrltest.Deps) error {
		r := &Reconciler{Client: d.Mgr.GetClient(), Live: d.Mgr.GetAPIReader(), Recorder: d.Recorder, Metrics: d.Metrics,
			Interval: opts.PoolStatusInterval, Now: clock.Func(opts.Now)}
		return r.SetupWithManager(d.Mgr)
	})
}
