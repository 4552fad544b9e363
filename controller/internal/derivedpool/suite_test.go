package derivedpool

import (
	"os"
	"testing"

	"github.com/netpool/netpool/controller/internal/clock"
	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/controller/internal/nad"
	"github.com/netpool/netpool/test/envtest"
)

func TestMain(m *testing.M) { os.Exit(envtest.RunShared(m.Run)) }

// startManager runs the derived pool cleanup (and the NAD reconciler that derives pools) with opts in a manager of the test.
func startManager(t *testing.T, opts ctrltest.Options) *ctrltest.Manager {
	t.Helper()
	return ctrltest.StartManager(t, nil, opts, func(d ctrltest.Deps) error {
		r := &Reconciler{Client: d.Mgr.GetClient(), Live: d.Mgr.GetAPIReader(), Grace: opts.GCGrace, Now: clock.Func(opts.Now)}
		if err := r.SetupWithManager(d.Mgr); err != nil {
			return err
		}
		// The NAD reconciler runs beside it, as in the controller: it derives the pools.
		return (&nad.Reconciler{Client: d.Mgr.GetClient(), Recorder: d.Recorder}).SetupWithManager(d.Mgr)
	})
}
