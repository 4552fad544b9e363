package agent

import (
	"os"
	"testing"

	"github.com/netpool/netpool/test/envtest"
)

// The package's envtest-backed tests share one API server (envtest.Shared), each with pools,
// ranges, networks and namespaces of its own; TestAPIServerRestartDuringARun, which crashes and
// restarts its control plane, has one to itself.
func TestMain(m *testing.M) { os.Exit(envtest.RunShared(m.Run)) }
