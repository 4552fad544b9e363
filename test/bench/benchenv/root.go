package benchenv

import (
	"os/exec"

	"github.com/netpool/netpool/test/bench/benchproc"
)

// Root returns the module's root directory: the checkout whose hack/, crds/ and cmd/ a bench uses.
func Root() (string, error) {
	return benchproc.Output(exec.Command("go", "list", "-m", "-f", "{{.Dir}}"))
}
