package process

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// The kill test counts a call as cut inside the lock only when waitStopped saw it stopped; this
// checks that it tells a stopped process from a running and an exited one.
func TestWaitStoppedTellsStoppedFromExited(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	if state, err := processState(pid); err != nil || state == 'T' {
		t.Fatalf("state of a sleeping process: %c, %v; want a running or sleeping one", state, err)
	}
	if stopped, err := waitStopped(pid, 50*time.Millisecond); err != nil || stopped {
		t.Fatalf("waitStopped on a process nobody stopped = %v, %v; want false once the wait is over", stopped, err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if stopped, err := waitStopped(pid, time.Minute); err != nil || !stopped {
		t.Fatalf("waitStopped after SIGSTOP = %v, %v; want true", stopped, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // reaped: its /proc entry is gone
	if stopped, err := waitStopped(pid, time.Minute); err != nil || stopped {
		t.Fatalf("waitStopped on a reaped process = %v, %v; want false at once", stopped, err)
	}
}
