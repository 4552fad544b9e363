package agent

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/netpool/netpool/test/envtest"
)

// TestRestartWhileRBACWarmsUp: right after an API server restart, its authorizer answers 403 until
// its caches of roles and bindings are filled. An agent with the shipped RBAC must see that as
// "try again later" (11), never as a broken store (105), and succeed once RBAC is warm.
func TestRestartWhileRBACWarmsUp(t *testing.T) {
	env := envtest.Start(t)
	applyManifests(t, env)
	kubeconfig := env.ServiceAccountKubeconfig(t, agentNamespace, agentServiceAccount)
	n := mustRunAs(t, kubeconfig, "node-a", filepath.Join(socketDir(t), "a.sock"))
	conf := netConf("warm", n.socket, `,"range":"10.83.0.0/16"`)
	sh := newShim()
	sh.addIP(t, "before", conf)

	for round := range 3 {
		if err := env.CrashAPIServer(); err != nil {
			t.Fatal(err)
		}
		if err := env.StopControlPlane(); err != nil {
			t.Fatal(err)
		}
		// As a runtime would: call, and on 11 call again, until the ADD succeeds; from the outage
		// through the start of the API server, whose first answers come before RBAC is warm.
		type outcome struct {
			seen []string
			err  error
		}
		done := make(chan outcome, 1)
		go func() {
			var o outcome
			deadline := time.Now().Add(90 * time.Second)
			for i := 0; ; i++ {
				id := fmt.Sprintf("r%d-%d", round, i)
				_, err := sh.call("ADD", id, "", conf)
				if err == nil {
					done <- o
					return
				}
				o.seen = append(o.seen, fmt.Sprintf("%d %.300s", codeOf(err), err))
				if code := codeOf(err); code != 11 {
					o.err = fmt.Errorf("ADD %s around the restart: %w; want 11 (try again later) while the API server warms up", id, err)
					done <- o
					return
				}
				if time.Now().After(deadline) {
					o.err = fmt.Errorf("ADD never succeeded after the restart")
					done <- o
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		time.Sleep(time.Second)
		if err := env.StartControlPlane(); err != nil {
			t.Fatal(err)
		}
		o := <-done
		distinct := map[string]int{}
		for _, s := range o.seen {
			distinct[s[:min(len(s), 120)]]++
		}
		if o.err != nil {
			t.Fatalf("round %d: %v (failures so far: %v)", round, o.err, distinct)
		}
		t.Logf("round %d: %d attempts failed with 11 before success: %v", round, len(o.seen), distinct)
	}
}
