package node

import (
	"os"
	"testing"

	"github.com/netpool/netpool/controller/internal/clock"
	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/test/envtest"
)

func TestMain(m *testing.M) { os.Exit(envtest.RunShared(m.Run)) }

// startManager runs the node reclaim with opts in a manager of the test.
func startManager(t *testing.T, opts ctrltest.Options) *ctrltest.Manager {
	t.Helper()
	return ctrltest.StartManager(t, nil, opts, func(d ctrltest.Deps) error {
		r := &Reconciler{Client: d.Mgr.GetClient(), Live: d.Mgr.GetAPIReader(), Release: d.Release, Grace: opts.GCGrace,
			Now: clock.Func(opts.Now)}
		return r.SetupWithManager(d.Mgr)
	})
}
