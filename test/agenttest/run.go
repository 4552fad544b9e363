// Package agenttest runs a netpool node agent inside a test process, as netpool-agent would, for
// the tests of other packages that drive the plugin through it (cni-plugin/agent's own tests
// cannot import it: it imports that package).
package agenttest

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/netpool/netpool/cni-plugin/agent"
	"github.com/netpool/netpool/internal/kubeclient"
)

// Run starts an agent with opts against the API server of cfg (with the agent's rate limits),
// waits until it serves its socket, and stops it at the test's end, failing the test if it did not
// stop cleanly. Log and Stderr default to discarding.
func Run(t testing.TB, cfg *rest.Config, opts agent.Options) {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = kubeclient.DefaultQPS, kubeclient.DefaultBurst
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Stderr == nil {
		opts.Stderr = &bytes.Buffer{}
	}
	a, err := agent.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	select {
	case <-a.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("agent %s stopped: %v", opts.NodeName, err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("agent %s not ready after 30s", opts.NodeName)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent %s: %v", opts.NodeName, err)
		}
	})
}
