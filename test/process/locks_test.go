package process

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// inode returns the inode number of path.
func inode(path string) (uint64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("no inode for %s", path)
	}
	return st.Ino, nil
}

// lockHolders returns the PIDs holding a flock on the file with inode ino, from /proc/locks,
// whose lines read "1: FLOCK  ADVISORY  WRITE 4242 fd:00:1234 0 EOF".
func lockHolders(ino uint64) ([]int, error) {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil, err
	}
	var pids []int
	want := ":" + strconv.FormatUint(ino, 10)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] != "FLOCK" || f[0] == "->" || !strings.HasSuffix(f[5], want) {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, sc.Err()
}

// snipe stops the targets it sees holding a flock on the file with inode ino, each after a random
// delay of up to maxDelay, notes those still holding the lock once frozen, and kills them, until
// stop is closed. Freezing first makes "cut while holding the lock" a fact read from /proc/locks
// rather than a guess from timing: a target seen there may have released the lock, or exited,
// before the signal arrives.
func snipe(ino uint64, targets *running, maxDelay time.Duration, stop <-chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		pids, err := lockHolders(ino)
		if err != nil {
			return err
		}
		for _, pid := range pids {
			cmd := targets.take(pid)
			if cmd == nil {
				continue
			}
			time.Sleep(rand.N(maxDelay))
			if err := freezeAndKill(ino, targets, cmd); err != nil {
				return err
			}
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// freezeAndKill stops cmd, records whether it still holds the flock on ino while stopped, and
// kills it. A target that exited meanwhile is left alone: a survivor.
func freezeAndKill(ino uint64, targets *running, cmd *exec.Cmd) error {
	pid := cmd.Process.Pid
	if cmd.Process.Signal(syscall.SIGSTOP) != nil {
		return nil // it has exited already
	}
	stopped, err := waitStopped(pid, 30*time.Second)
	if err != nil {
		return err
	}
	if stopped {
		holders, err := lockHolders(ino)
		if err != nil {
			return err
		}
		if slices.Contains(holders, pid) {
			targets.markFrozenInLock(cmd)
		}
	}
	_ = cmd.Process.Kill() // SIGKILL ends a stopped process too
	return nil
}

// waitStopped waits until the process pid is stopped by a signal (true), or has exited or
// become a zombie (false), reading its state from /proc/<pid>/stat. A process in uninterruptible
// sleep (an fsync on a busy disk) stops only when it leaves it; past timeout it counts as not
// stopped, so the kill that follows is not counted as one inside the lock.
func waitStopped(pid int, timeout time.Duration) (bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		state, err := processState(pid)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ESRCH):
			return false, nil
		case err != nil:
			return false, err
		case state == 'T' || state == 't':
			return true, nil
		case state == 'Z' || state == 'X':
			return false, nil
		case time.Now().After(deadline):
			return false, nil
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// processState returns the state letter of /proc/<pid>/stat, which reads "4242 (netpool) S ...";
// the name may hold spaces and parentheses, so the state follows the last ')'.
func processState(pid int) (byte, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("unreadable /proc/%d/stat: %q", pid, b)
	}
	return b[i+2], nil
}
