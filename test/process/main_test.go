package process

import (
	"os"
	"testing"

	"github.com/netpool/netpool/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
