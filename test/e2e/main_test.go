package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/netpool/netpool/test/harness"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := harness.RemoveBinDir(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
