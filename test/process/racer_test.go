package process

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/netpool/netpool/test/harness"
)

// killRacers is how many ADD processes race in one wave; half of them are killed.
const killRacers = 64

// killMode says when a racer gets SIGKILL.
type killMode int

const (
	spared     killMode = iota
	killTimed           // at a random moment after start, whatever it is doing then
	killInLock          // a random moment after it is seen holding the store's lock
)

// racer is one ADD process of the kill test and what became of it.
type racer struct {
	id    string
	mode  killMode
	after time.Duration // for killTimed: how long after start
	// addr and exited are set by runRacer when the process exited with status 0 and a result.
	addr   netip.Addr
	exited bool
	// signalled is set by runRacer when the process died of SIGKILL: the kill came while it ran.
	signalled bool
	// cutInLock is set by runRacer when the sniper froze it while it held the store's lock and
	// then killed it: the call was cut inside its transaction.
	cutInLock bool
}

// newRacers returns killRacers racers: a random quarter killed at a random moment within window
// (the time a wave of racers needs to pass the lock one by one), so that most of these land
// before or after the racer's transaction, and another quarter killed while it holds the lock.
// Their container IDs start with prefix, one per wave.
func newRacers(t *testing.T, prefix string, window time.Duration) []*racer {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	t.Logf("%s: seed %d, timed kills spread over %v", prefix, seed, window)
	racers := make([]*racer, killRacers)
	for i := range racers {
		racers[i] = &racer{id: containerID(prefix, i)}
	}
	for n, i := range rng.Perm(killRacers)[:killRacers/2] {
		if n%2 == 0 {
			racers[i].mode = killInLock
			continue
		}
		racers[i].mode = killTimed
		racers[i].after = time.Duration(rng.Int64N(int64(window) + 1))
	}
	return racers
}

// running maps the PIDs of live racers chosen for killInLock to their processes, and remembers
// which of them the sniper froze while they held the store's lock.
type running struct {
	mu           sync.Mutex
	procs        map[int]*exec.Cmd
	frozenInLock map[*exec.Cmd]bool // by process, not PID: a PID is reused once its racer is gone
}

func (r *running) add(cmd *exec.Cmd) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.procs == nil {
		r.procs = map[int]*exec.Cmd{}
	}
	r.procs[cmd.Process.Pid] = cmd
}

// take returns and forgets the process of pid, if it is a target.
func (r *running) take(pid int) *exec.Cmd {
	r.mu.Lock()
	defer r.mu.Unlock()
	cmd := r.procs[pid]
	delete(r.procs, pid)
	return cmd
}

func (r *running) markFrozenInLock(cmd *exec.Cmd) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozenInLock == nil {
		r.frozenInLock = map[*exec.Cmd]bool{}
	}
	r.frozenInLock[cmd] = true
}

func (r *running) wasFrozenInLock(cmd *exec.Cmd) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.frozenInLock[cmd]
}

// runRacer starts one ADD, kills it as r.mode says (in-lock targets are registered in targets for
// the sniper), and records its result when it survives.
func runRacer(ctx context.Context, f *fixture, r *racer, targets *running) error {
	cmd := harness.Command(ctx, f.plugin, harness.Invocation{
		Command: "ADD", ContainerID: r.id, IfName: "eth0", Config: f.conf,
	})
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	switch r.mode {
	case killTimed:
		timer := time.AfterFunc(r.after, func() {
			_ = cmd.Process.Kill() // it may have exited already, which is one of the cases under test
		})
		defer timer.Stop()
	case killInLock:
		targets.add(cmd)
		defer targets.take(cmd.Process.Pid)
	}
	if err := cmd.Wait(); err != nil {
		if r.mode != spared {
			ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
			r.signalled = ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
			r.cutInLock = r.signalled && r.mode == killInLock && targets.wasFrozenInLock(cmd)
			return nil // killed, or exited on its own before the kill: both are cases under test
		}
		return err
	}
	res, err := current.NewResult(stdout.Bytes())
	if err != nil {
		return err
	}
	cur, err := current.NewResultFromResult(res)
	if err != nil {
		return err
	}
	if len(cur.IPs) != 1 {
		return fmt.Errorf("ADD %s printed %s, want one address", r.id, stdout.Bytes())
	}
	r.addr, _ = netip.AddrFromSlice(cur.IPs[0].Address.IP)
	r.addr = r.addr.Unmap()
	r.exited = true
	return nil
}
