package cli

import (
	"os"
	"testing"

	"github.com/netpool/netpool/test/envtest"
)

// The commands' tests against a cluster share one API server (envtest.Shared); each uses names
// of its own.
func TestMain(m *testing.M) { os.Exit(envtest.RunShared(m.Run)) }
