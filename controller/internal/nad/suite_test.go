package nad

import (
	"os"
	"testing"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/test/envtest"
)

func TestMain(m *testing.M) { os.Exit(envtest.RunShared(m.Run)) }

// startManager runs the NAD reconciler in a manager of the test (the NAD CRD is served: no gate).
func startManager(t *testing.T, opts ctrltest.Options) *ctrltest.Manager {
	t.Helper()
	return ctrltest.StartManager(t, nil, opts, func(d ctrltest.Deps) error {
		return (&Reconciler{Client: d.Mgr.GetClient(), Recorder: d.Recorder}).SetupWithManager(d.Mgr)
	})
}
