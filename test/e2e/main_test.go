package e2e

import (
	"os"
	"testing"

	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/harness"
)

// The Kubernetes-mode tests share one API server (envtest.Shared), each with networks, ranges and
// bridges of its own; TestKubernetesAPIServerRestartInNetns, which crashes and restarts its
// control plane, has one to itself.
func TestMain(m *testing.M) { os.Exit(envtest.RunShared(func() int { return harness.Main(m) })) }
