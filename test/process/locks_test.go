package process

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
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

// snipe kills the targets it sees holding a flock on the file with inode ino, each after a random
// delay of up to maxDelay, until stop is closed. Whether a kill landed before the target exited
// shows in the target's exit status (runRacer records it).
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
			if cmd := targets.take(pid); cmd != nil {
				time.Sleep(rand.N(maxDelay))
				_ = cmd.Process.Kill() // it may have exited meanwhile: a survivor
			}
		}
		time.Sleep(50 * time.Microsecond)
	}
}
