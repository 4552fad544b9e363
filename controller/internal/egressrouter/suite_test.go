package egressrouter

import (
	"os"
	"testing"

	"github.com/netpool/netpool/test/envtest"
)

func TestMain(m *testing.M) { os.Exit(envtest.RunShared(m.Run)) }
