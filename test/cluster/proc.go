package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// proc is one daemon the cluster started: the binary itself (never a shell around it), so that its
// PID is the daemon's and stopping it by PID stops the daemon.
type proc struct {
	name string
	// logDir, env and argv start it again.
	logDir string
	env    []string
	argv   []string
	cmd    *exec.Cmd
	log    string
	done   chan struct{}
	err    error // the exit status, once done is closed
}

// startProc starts argv with its output in logDir/<name>.log, in a process group of its own so a
// terminal's Ctrl-C reaches only the harness, which stops the daemons in order.
func startProc(logDir, name string, env []string, argv ...string) (*proc, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("failed to open the log of %s: %w", name, err)
	}
	defer f.Close() // the child holds its own descriptor
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start %s: %w", name, err)
	}
	p := &proc{name: name, logDir: logDir, env: env, argv: argv, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// restart stops the daemon and starts it again as it was started, its log appended to.
func (p *proc) restart(grace time.Duration) (*proc, error) {
	if err := p.stop(grace); err != nil {
		return nil, err
	}
	return startProc(p.logDir, p.name, p.env, p.argv...)
}

// pid is the daemon's process ID.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the daemon has exited, and how.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs and waits for the exit. Stopping a stopped
// process is not an error.
func (p *proc) stop(grace time.Duration) error {
	if done, _ := p.exited(); done {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("failed to signal %s (pid %d): %w", p.name, p.pid(), err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("failed to kill %s (pid %d): %w", p.name, p.pid(), err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.pid())
	}
}

// tail is the end of the daemon's log, for an error message.
func (p *proc) tail() string {
	return tailFile(p.log, 4000)
}

func tailFile(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := fi.Size() - n
	if off < 0 {
		off = 0
	}
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return ""
	}
	return string(buf)
}

// run runs a short command and returns its combined output; an error names the command and says
// what it printed.
func run(argv ...string) (string, error) {
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%v: %w: %s", argv, err, out)
	}
	return string(out), nil
}
