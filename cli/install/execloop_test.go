package install

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netpool/netpool/test/poll"
)

// execLoop is a separate process that execs a binary over and over until told to stop. It is a
// shell, started before the installer writes anything, so that it holds none of the installer's
// file descriptors (a child forked while the installer held a file open for writing would make
// its own exec of that file fail, which is a test artefact, not something a runtime meets).
type execLoop struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	runs string // a file that grows by one byte per finished run
	stop func(t *testing.T) (int, string)
}

// started is how many runs have finished so far.
func (l *execLoop) started() int {
	fi, err := os.Stat(l.runs)
	if err != nil {
		return 0
	}
	return int(fi.Size())
}

// execLoopScript runs "$1" (a Go test binary, which runs no test for -test.run=^$) until the file
// "$2" exists, prints each failure and finally the number of runs. It appends a byte to "$3" after
// each run, so the caller can see how far it got.
const execLoopScript = `n=0
while [ ! -e "$2" ]; do
  if ! out=$("$1" -test.run='^$' 2>&1); then echo "FAIL: $out"; fi
  n=$((n+1))
  printf x >> "$3"
done
echo "runs $n"`

func startExecLoop(t *testing.T, binary string) *execLoop {
	t.Helper()
	dir := t.TempDir()
	stopFile, runsFile := filepath.Join(dir, "stop"), filepath.Join(dir, "runs")
	out := &bytes.Buffer{}
	cmd := exec.Command("/bin/sh", "-c", execLoopScript, "sh", binary, stopFile, runsFile)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &execLoop{cmd: cmd, out: out, runs: runsFile}
	l.stop = func(t *testing.T) (int, string) {
		t.Helper()
		if err := os.WriteFile(stopFile, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("exec loop: %v\n%s", err, out)
			}
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			t.Fatalf("exec loop did not stop\n%s", out)
		}
		var failures []string
		runs := -1
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if n, ok := strings.CutPrefix(line, "runs "); ok {
				runs, _ = strconv.Atoi(n)
			} else if line != "" {
				failures = append(failures, line)
			}
		}
		if runs < 0 {
			t.Fatalf("exec loop printed no count:\n%s", out)
		}
		return runs, strings.Join(failures, "\n")
	}
	// The installer starts once the loop has run the binary once.
	t.Cleanup(func() {
		if t.Failed() && l.started() == 0 {
			l.stop(t)
			t.Logf("the exec loop printed:\n%s", out) // the loop has ended: out is still
		}
	})
	poll.Eventually(t, time.Minute, "the exec loop runs the binary", func() error {
		if l.started() == 0 {
			return errors.New("it has not run it yet")
		}
		return nil
	})
	return l
}
