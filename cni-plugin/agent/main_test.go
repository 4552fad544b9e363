package agent

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/poll"
)

func TestNodeName(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == NodeNameEnv {
				return v
			}
			return ""
		}
	}
	for _, tt := range []struct{ flag, env, want, err string }{
		{"node-1", "", "node-1", ""},
		{"node-1", "sim-7", "sim-7", ""},
		{"", "sim-7", "sim-7", ""},
		{"", "", "", "no node name: set --node-name or the NODENAME environment variable"},
	} {
		got, err := NodeName(tt.flag, env(tt.env))
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && err.Error() != tt.err) {
			t.Errorf("NodeName(%q, NODENAME=%q) = %q, %v", tt.flag, tt.env, got, err)
		}
	}
}

func TestMainErrors(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	getenv := func(string) string { return "" }
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		f    Flags
		want string
	}{
		{"no node name", Flags{}, "no node name"},
		{"missing kubeconfig", Flags{NodeName: "n", Kubeconfig: "/nonexistent/kubeconfig"}, "failed to load kubeconfig /nonexistent/kubeconfig"},
		{"not in a cluster", Flags{NodeName: "n"}, "set --kubeconfig outside a cluster"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			if err := Main(ctx, tt.f, getenv, log); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Main() = %v, want %q", err, tt.want)
			}
		})
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: t}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Main(ctx, Flags{NodeName: "Node_A", Kubeconfig: kubeconfig}, getenv, log); err == nil || !strings.Contains(err.Error(), `node name "Node_A" is not a valid Kubernetes node name`) {
		t.Errorf("Main() with an invalid node name = %v", err)
	}
	// An API server that never answers: Run gives up when its context ends, before serving.
	cfg, err := clientConfig(Flags{Kubeconfig: kubeconfig, QPS: kubeclient.DefaultQPS, Burst: kubeclient.DefaultBurst})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != kubeclient.DefaultQPS || cfg.Burst != kubeclient.DefaultBurst || cfg.UserAgent != "netpool-agent" {
		t.Errorf("config = qps %v burst %d agent %q", cfg.QPS, cfg.Burst, cfg.UserAgent)
	}
	a, err := New(cfg, Options{NodeName: "n", Socket: filepath.Join(socketDir(t), "a.sock"), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := a.Run(short); err == nil || !strings.Contains(err.Error(), "cache did not sync") {
		t.Errorf("Run() against a dead API server = %v", err)
	}
	if _, err := os.Stat(filepath.Join(socketDir(t), "a.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket created before the cache synced: %v", err)
	}
}

// TestMainLifecycle runs the agent as its main does: NODENAME overrides the flag, a stale socket
// is replaced, a second agent on the same socket is refused, and shutdown removes the socket.
func TestMainLifecycle(t *testing.T) {
	env := envtest.Shared(t)
	socket := filepath.Join(socketDir(t), "agent.sock")
	stale, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	stale.(interface{ SetUnlinkOnClose(bool) }).SetUnlinkOnClose(false) // as an agent killed with -9 leaves it
	_ = stale.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	getenv := func(k string) string {
		if k == NodeNameEnv {
			return "sim-node-3"
		}
		return ""
	}
	log := slog.New(slog.DiscardHandler)
	go func() {
		done <- Main(ctx, Flags{Kubeconfig: env.Kubeconfig, NodeName: "flag-node", Socket: socket, QPS: kubeclient.DefaultQPS, Burst: kubeclient.DefaultBurst}, getenv, log)
	}()
	var out string
	poll.Eventually(t, 30*time.Second, "the agent serves", func() error {
		var err error
		out, err = newShim().call("ADD", "c1", "", netConf("net1", socket, `,"range":"10.90.0.0/24"`))
		return err
	})
	if firstIP(t, out) != "10.90.0.1" {
		t.Errorf("ADD = %s", out)
	}
	var r ipamv1.OverlappingRangeIPReservation
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "10.90.0.1"}, &r); err != nil || r.Spec.Node != "sim-node-3" {
		t.Errorf("reservation node = %q (%v), want NODENAME's sim-node-3", r.Spec.Node, err)
	}

	// A second agent on the same socket is refused; the first keeps serving.
	cfg := rest.CopyConfig(env.Config)
	second, err := New(cfg, Options{NodeName: "other", Socket: socket, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	if err := second.Run(sctx); err == nil || !strings.Contains(err.Error(), "another agent is already listening at "+socket) {
		t.Errorf("second agent Run() = %v", err)
	}
	// A metrics address that cannot be bound stops the agent before it serves.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	third, err := New(cfg, Options{NodeName: "third", Socket: socket + "3", MetricsBindAddress: busy.Addr().String(), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := third.Run(sctx); err == nil || !strings.Contains(err.Error(), "failed to listen on the metrics address") {
		t.Errorf("Run() with a busy metrics address = %v", err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Main() = %v", err)
	}
	if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after shutdown: %v", err)
	}
}
