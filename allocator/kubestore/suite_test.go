package kubestore

import (
	"os"
	"testing"

	"github.com/netpool/netpool/test/envtest"
)

// The package's envtest-backed tests share one API server (envtest.Shared), each with pools,
// ranges and networks of its own; faults are injected in each store's transport, never in the
// API server.
func TestMain(m *testing.M) { os.Exit(envtest.RunShared(m.Run)) }
