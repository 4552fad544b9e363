package harness

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Bind is one bind mount of a mount-namespace view: Source (a path of this machine) appears at
// Target inside the view. Target must exist.
type Bind struct {
	Source, Target string
}

// viewScript mounts its argument pairs up to "--" and then execs the rest. It runs under
// unshare(1) in a new, private mount namespace, so nothing it mounts is seen outside.
const viewScript = `while [ "$1" != "--" ]; do mount --bind "$1" "$2"; shift 2; done; shift; exec "$@"`

// viewArgv is the command line that runs argv in a private mount namespace with binds mounted.
func viewArgv(binds []Bind, argv []string) []string {
	out := []string{"unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-ec", viewScript, "sh"}
	for _, b := range binds {
		out = append(out, b.Source, b.Target)
	}
	out = append(out, "--")
	return append(out, argv...)
}

// MountViewCommand returns a command that runs argv in a private mount namespace in which binds
// are mounted: how a test shows a process the file system a container would (Multus' thick
// daemon) or gives a simulated node its own /run.
func MountViewCommand(binds []Bind, argv ...string) *exec.Cmd {
	a := viewArgv(binds, argv)
	return exec.Command(a[0], a[1:]...)
}

// WriteMountViewWrapper writes an executable script at path that runs target, with the wrapper's
// own arguments, environment and stdin, in a private mount namespace with binds mounted. A
// runtime that execs the wrapper by a plugin's name (libcni finds it in CNI_PATH) runs the plugin
// in that view.
func WriteMountViewWrapper(path, target string, binds []Bind) error {
	a := viewArgv(binds, []string{target})
	quoted := make([]string, len(a))
	for i, s := range a {
		quoted[i] = shellQuote(s)
	}
	script := "#!/bin/sh\nexec " + strings.Join(quoted, " ") + ` "$@"` + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	return nil
}

// shellQuote quotes s for /bin/sh as one word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
