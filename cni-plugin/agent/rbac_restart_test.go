package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/poll"
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
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			i := 0
			err := poll.Until(ctx, 20*time.Millisecond, func(context.Context) error {
				id := fmt.Sprintf("r%d-%d", round, i)
				i++
				_, err := sh.call("ADD", id, "", conf)
				if err == nil {
					return nil
				}
				o.seen = append(o.seen, fmt.Sprintf("%d %.300s", codeOf(err), err))
				if code := codeOf(err); code != 11 {
					o.err = fmt.Errorf("ADD %s around the restart: %w; want 11 (try again later) while the API server warms up", id, err)
					return nil // no retry: the call failed as it must not
				}
				return err
			})
			if err != nil {
				o.err = fmt.Errorf("ADD never succeeded after the restart")
			}
			done <- o
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
