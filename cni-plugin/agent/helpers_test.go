package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/netpool/netpool/cni-plugin/agentproto"
	"github.com/netpool/netpool/cni-plugin/ipamplugin"
	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/test/envtest"
)

// socketDir returns a short directory for sockets (paths are limited to 108 bytes).
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "npa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// running is an agent started by a test.
type running struct {
	agent  *Agent
	socket string
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// MustRun starts an agent for node on env and waits until it serves; the test's end stops it.
func MustRun(t *testing.T, env *envtest.Env, node, socket string, opts Options) *running {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = kubeclient.DefaultQPS, kubeclient.DefaultBurst
	opts.NodeName, opts.Socket = node, socket
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Stderr == nil {
		opts.Stderr = &bytes.Buffer{}
	}
	return startAgent(t, cfg, opts)
}

// startAgent starts an agent with cfg and opts and waits until it serves; the test's end stops it.
func startAgent(t *testing.T, cfg *rest.Config, opts Options) *running {
	t.Helper()
	a, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{agent: a, socket: opts.Socket, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx) }()
	select {
	case <-a.Ready():
	case err := <-r.done:
		cancel()
		t.Fatalf("agent %s stopped: %v", opts.NodeName, err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("agent %s not ready after 30s (cannot list and watch what it needs?)", opts.NodeName)
	}
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop stops the agent and checks that Run ended cleanly; later calls do nothing.
func (r *running) stop(t *testing.T) {
	r.once.Do(func() {
		r.cancel()
		if err := <-r.done; err != nil {
			t.Errorf("agent Run = %v", err)
		}
	})
}

// shim is the plugin binary's Plugin, in-process: it forwards datastore kubernetes calls.
type shim struct {
	out *bytes.Buffer
	p   *ipamplugin.Plugin
}

func newShim() *shim {
	out := &bytes.Buffer{}
	return &shim{out: out, p: &ipamplugin.Plugin{
		ReadFile:  func(p string) ([]byte, error) { return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist) },
		OpenStore: ipamplugin.OpenStore, Stdout: out, Stderr: &bytes.Buffer{}, Forward: agentproto.Call,
	}}
}

// call runs verb for attachment id (ifName net1) and returns what the plugin printed.
func (s *shim) call(verb, id, args string, stdin []byte) (string, error) {
	s.out.Reset()
	f := s.p.Funcs()
	fn := map[string]func(*skel.CmdArgs) error{"ADD": f.Add, "DEL": f.Del, "CHECK": f.Check, "GC": f.GC, "STATUS": f.Status}[verb]
	err := fn(&skel.CmdArgs{ContainerID: id, IfName: "net1", Netns: "/var/run/netns/" + id, Args: args, StdinData: stdin})
	return s.out.String(), err
}

// addIP runs an ADD and returns the first address of its result.
func (s *shim) addIP(t *testing.T, id string, stdin []byte) string {
	t.Helper()
	out, err := s.call("ADD", id, "", stdin)
	if err != nil {
		t.Fatalf("ADD %s: %v", id, err)
	}
	return firstIP(t, out)
}

func firstIP(t *testing.T, out string) string {
	t.Helper()
	ip, err := resultIP(out)
	if err != nil {
		t.Fatal(err)
	}
	return ip
}

// resultIP returns the first address of a CNI result; it is firstIP for goroutines other than the
// test's.
func resultIP(out string) (string, error) {
	var res struct {
		IPs []struct{ Address string } `json:"ips"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.IPs) == 0 {
		return "", fmt.Errorf("result %q has no address: %v", out, err)
	}
	ip, _, _ := strings.Cut(res.IPs[0].Address, "/")
	return ip, nil
}

// lagProbe measures how late this process's timers fire while a test runs: on a loaded machine a
// deadline fires late by what the scheduler delays any goroutine, which a bound on elapsed time must
// allow for without allowing a hang.
type lagProbe struct {
	mu    sync.Mutex
	worst time.Duration
}

// startLagProbe starts a probe that sleeps 10 ms at a time until the test ends.
func startLagProbe(t *testing.T) *lagProbe {
	p := &lagProbe{}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		const tick = 10 * time.Millisecond
		for {
			start := time.Now()
			select {
			case <-done:
				return
			case <-time.After(tick):
			}
			late := time.Since(start) - tick
			p.mu.Lock()
			p.worst = max(p.worst, late)
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
	return p
}

// max returns the worst lateness seen so far.
func (p *lagProbe) max() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.worst
}

// syncBuffer is a bytes.Buffer that concurrent writers (an agent's calls) may share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// netConf is a network config for the agent at socket.
func netConf(name, socket, ipamExtra string) []byte {
	return fmt.Appendf(nil, `{"cniVersion":"1.1.0","name":%q,"ipam":{"type":"netpool","datastore":"kubernetes","kubernetes":{"agent_socket":%q}%s}}`,
		name, socket, ipamExtra)
}

func wantCode(t *testing.T, err error, code uint, msg string) {
	t.Helper()
	var e *types.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not a CNI error", err)
	}
	if e.Code != code || !strings.Contains(e.Msg, msg) {
		t.Fatalf("error = code %d %q, want code %d containing %q", e.Code, e.Msg, code, msg)
	}
}

func codeOf(err error) uint {
	var e *types.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}
