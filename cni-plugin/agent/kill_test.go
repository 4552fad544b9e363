package agent

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/netpool/netpool/cni-plugin/agentproto"
	"github.com/netpool/netpool/test/envtest"
)

// TestKilledPluginProcessesLeaveNoDuplicate runs real plugin processes in Kubernetes mode and
// SIGKILLs half of them at random moments of their ADD, as a runtime's timeout or a node's OOM
// killer would. The agent finishes or abandons each call on its own, so afterwards no address is
// held twice, every ADD that printed a result holds what it printed, and GC listing only those
// survivors reclaims everything else. The run must have cut at least one call mid-flight (served
// by the agent, never printed by its killed process), or it tested nothing.
func TestKilledPluginProcessesLeaveNoDuplicate(t *testing.T) {
	env := envtest.Shared(t)
	env.WarmUp(t)
	bin := buildPlugin(t)
	node := MustRun(t, env, "node-k", filepath.Join(socketDir(t), "k.sock"), Options{})
	conf := netConf("net-kill", node.socket, `,"range":"10.81.0.0/22"`)

	// One undisturbed ADD creates the pool and claims a block, and shows how long a whole plugin
	// run takes here: the kills are spread over that window, so they land before the call reaches
	// the agent, while the agent serves it, and after it answers, whatever the machine's speed.
	began := time.Now()
	if out, err := pluginCmd(bin, "ADD", "k-calm", conf).Output(); err != nil {
		t.Fatalf("first ADD: %v: %s", err, out)
	}
	window := time.Since(began)
	servedBefore := served(t, node.agent, agentproto.VerbAdd)

	const procs = 48
	printed := make([]string, procs) // the address each surviving ADD printed
	signalled := make([]bool, procs) // the process died of the SIGKILL
	rng := rand.New(rand.NewPCG(7, 9))
	var wg sync.WaitGroup
	for i := range procs {
		cmd := pluginCmd(bin, "ADD", fmt.Sprintf("k%d", i), conf)
		var out bytes.Buffer
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		kill, delay := i%2 == 0, time.Duration(rng.Int64N(int64(window)+1))
		wg.Go(func() {
			if kill {
				time.Sleep(delay)
				_ = cmd.Process.Kill() // it may have finished already: that is a survivor
			}
			err := cmd.Wait()
			if err == nil {
				printed[i] = firstIP(t, out.String())
				return
			}
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
				signalled[i] = true
				return
			}
			t.Errorf("ADD k%d: %v", i, err)
		})
	}
	wg.Wait()

	// Calls of killed processes may still be under way in the agent: wait until the pool is still.
	held := env.SettledReservations(t, "10.81.0.0-22")
	byOwner := map[string]string{}
	for _, r := range held {
		if prev, dup := byOwner[r.Spec.ContainerID]; dup {
			t.Errorf("%s holds %s and %s", r.Spec.ContainerID, prev, r.Spec.Address)
		}
		byOwner[r.Spec.ContainerID] = r.Spec.Address
	}
	valid := []string{`{"containerID":"k-calm","ifname":"net1"}`}
	for i, addr := range printed {
		if addr == "" {
			continue
		}
		id := fmt.Sprintf("k%d", i)
		valid = append(valid, fmt.Sprintf(`{"containerID":%q,"ifname":"net1"}`, id))
		if byOwner[id] != addr {
			t.Errorf("%s printed %s, the API server gives it %q", id, addr, byOwner[id])
		}
	}
	// Every ADD the agent served came from one of the wave's processes; those it served beyond the
	// ones that printed a result belong to processes killed after their call reached the agent.
	cut := served(t, node.agent, agentproto.VerbAdd) - servedBefore - (len(valid) - 1)
	killed := 0
	for _, s := range signalled {
		if s {
			killed++
		}
	}
	t.Logf("kills spread over %v: %d of %d ADDs printed a result, %d processes died of SIGKILL, %d of them after the agent took their call; %d reservations before GC",
		window, len(valid)-1, procs, killed, cut, len(held))
	if killed == 0 || cut <= 0 {
		t.Errorf("no call was cut mid-flight (%d processes died of SIGKILL, %d after reaching the agent): the run tested nothing", killed, cut)
	}

	gc := strings.Replace(string(conf), `"ipam"`, `"cni.dev/valid-attachments":[`+strings.Join(valid, ",")+`],"ipam"`, 1)
	if out, err := pluginCmd(bin, "GC", "", []byte(gc)).Output(); err != nil {
		t.Fatalf("GC: %v: %s", err, out)
	}
	if after := env.SettledReservations(t, "10.81.0.0-22"); len(after) != len(valid) {
		t.Errorf("%d reservations after GC, want the %d survivors", len(after), len(valid))
	}
	start := time.Now()
	out, err := pluginCmd(bin, "ADD", "after-the-kills", conf).Output()
	if err != nil || time.Since(start) > 2*time.Second {
		t.Errorf("ADD after the kills: %v after %v: %s", err, time.Since(start), out)
	}
}

// served returns how many calls of verb the agent has answered, whatever their outcome.
func served(t *testing.T, a *Agent, verb string) int {
	t.Helper()
	families, err := a.metrics.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, f := range families {
		if f.GetName() != "netpool_agent_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "verb" && l.GetValue() == verb {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int(n)
}

func pluginCmd(bin, verb, id string, stdin []byte) *exec.Cmd {
	cmd := exec.Command(bin)
	cmd.Env = []string{"CNI_COMMAND=" + verb, "CNI_CONTAINERID=" + id, "CNI_NETNS=/var/run/netns/" + id,
		"CNI_IFNAME=net1", "CNI_PATH=/opt/cni/bin"}
	cmd.Stdin = bytes.NewReader(stdin)
	return cmd
}
