package ipamplugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/netpool/netpool/cni-plugin/agentproto"
)

// fakeAgent serves the agent protocol on a fresh socket with h, as the real agent would.
func fakeAgent(t *testing.T, h agentproto.Handler) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "npfwd") // socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "agent.sock")
	ln, err := agentproto.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&agentproto.Server{Handler: h}).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return path
}

func forwardingPlugin(out *bytes.Buffer) *Plugin {
	return &Plugin{
		ReadFile:  func(p string) ([]byte, error) { return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist) },
		OpenStore: OpenStore,
		Stdout:    out,
		Stderr:    &bytes.Buffer{},
		Forward:   agentproto.Call,
	}
}

func kubeConf(socket, extra string) []byte {
	return []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"net1","ipam":{"type":"netpool","range":"10.5.0.0/24","datastore":"kubernetes","kubernetes":{"agent_socket":%q},"bbolt":{"lock_timeout":"1s"}%s}}`, socket, extra))
}

func TestForwardRelaysResultAndErrors(t *testing.T) {
	got := make(chan *agentproto.Request, 10)
	socket := fakeAgent(t, func(_ context.Context, r *agentproto.Request) *agentproto.Response {
		got <- r
		switch {
		case r.Verb == agentproto.VerbAdd && r.ContainerID == "full":
			return &agentproto.Response{Error: &agentproto.Error{Code: CodePoolExhausted, Msg: "pool exhausted: no free address in pool 10.5.0.0/24", Details: "d"}}
		case r.Verb == agentproto.VerbStatus:
			return &agentproto.Response{Error: &agentproto.Error{Code: types.ErrPluginNotAvailable, Msg: "plugin not available: exhausted"}}
		case r.Verb == agentproto.VerbAdd:
			return &agentproto.Response{Stdout: []byte(`{"cniVersion":"1.1.0","ips":[{"address":"10.5.0.7/24"}]}`)}
		}
		return &agentproto.Response{}
	})
	out := &bytes.Buffer{}
	f := forwardingPlugin(out).Funcs()
	stdin := kubeConf(socket, "")
	args := &skel.CmdArgs{ContainerID: "c1", IfName: "net1", Netns: "/var/run/netns/p", Args: "K8S_POD_NAME=p", Path: "/opt/cni/bin", NetnsOverride: "1", StdinData: stdin}
	if err := f.Add(args); err != nil {
		t.Fatal(err)
	}
	if out.String() != `{"cniVersion":"1.1.0","ips":[{"address":"10.5.0.7/24"}]}` {
		t.Errorf("stdout = %q", out)
	}
	want := &agentproto.Request{Verb: "ADD", ContainerID: "c1", IfName: "net1", Netns: "/var/run/netns/p", Args: "K8S_POD_NAME=p",
		Path: "/opt/cni/bin", NetnsOverride: "1", Stdin: stdin}
	if r := <-got; !reflect.DeepEqual(r, want) {
		t.Errorf("agent received %+v, want %+v", r, want)
	}

	// The agent's CNI error reaches the runtime unchanged, STATUS's included (not re-wrapped as 50).
	out.Reset()
	wantCode(t, f.Add(&skel.CmdArgs{ContainerID: "full", IfName: "net1", StdinData: stdin}), CodePoolExhausted, "pool exhausted: no free address in pool 10.5.0.0/24")
	<-got
	err := f.Status(&skel.CmdArgs{StdinData: stdin})
	var e *types.Error
	if !errors.As(err, &e) || *e != (types.Error{Code: types.ErrPluginNotAvailable, Msg: "plugin not available: exhausted"}) {
		t.Errorf("STATUS = %#v", err)
	}
	<-got
	// DEL answers with no output, and the plugin prints none.
	if err := f.Del(&skel.CmdArgs{ContainerID: "c1", IfName: "net1", StdinData: stdin}); err != nil || out.Len() != 0 {
		t.Errorf("DEL = %v, stdout %q", err, out)
	}
	if r := <-got; r.Verb != agentproto.VerbDel {
		t.Errorf("verb = %s", r.Verb)
	}
	for name, verb := range map[string]func(*skel.CmdArgs) error{"CHECK": f.Check, "GC": f.GC} {
		if err := verb(&skel.CmdArgs{ContainerID: "c1", IfName: "net1", StdinData: stdin}); err != nil {
			t.Errorf("%s = %v", name, err)
		}
		if r := <-got; r.Verb != name {
			t.Errorf("verb = %s, want %s", r.Verb, name)
		}
	}
}

func TestForwardAgentDown(t *testing.T) {
	dir, err := os.MkdirTemp("", "npfwd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "agent.sock")
	out := &bytes.Buffer{}
	f := forwardingPlugin(out).Funcs()
	for name, verb := range map[string]func(*skel.CmdArgs) error{"ADD": f.Add, "DEL": f.Del, "CHECK": f.Check, "GC": f.GC} {
		start := time.Now()
		wantCode(t, verb(&skel.CmdArgs{ContainerID: "c1", IfName: "net1", StdinData: kubeConf(socket, "")}), types.ErrTryAgainLater,
			"netpool agent not reachable at "+socket+": dial unix "+socket)
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s took %v with the agent down", name, d)
		}
	}
	// STATUS says ADD cannot succeed now (50), naming the socket.
	wantCode(t, f.Status(&skel.CmdArgs{StdinData: kubeConf(socket, "")}), types.ErrPluginNotAvailable,
		"plugin not available: netpool agent not reachable at "+socket)
	if out.Len() != 0 {
		t.Errorf("stdout = %q", out)
	}
}

func TestForwardAgentDoesNotAnswer(t *testing.T) {
	dir, err := os.MkdirTemp("", "npfwd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = agentproto.DecodeRequest(c)
			_ = c.Close() // an agent that crashed mid-call
		}
	}()
	f := forwardingPlugin(&bytes.Buffer{}).Funcs()
	wantCode(t, f.Add(&skel.CmdArgs{ContainerID: "c1", IfName: "net1", StdinData: kubeConf(socket, "")}), types.ErrTryAgainLater,
		"netpool agent did not answer at "+socket)
}

func TestForwardBoundAndLocalPaths(t *testing.T) {
	var deadline time.Time
	p := forwardingPlugin(&bytes.Buffer{})
	p.Forward = func(ctx context.Context, socket string, req *agentproto.Request) (*agentproto.Response, error) {
		deadline, _ = ctx.Deadline()
		return &agentproto.Response{}, nil
	}
	start := time.Now()
	if err := p.Funcs().Del(&skel.CmdArgs{ContainerID: "c", IfName: "e", StdinData: kubeConf("/run/x.sock", "")}); err != nil {
		t.Fatal(err)
	}
	// lock_timeout 1s: the plugin waits up to twice that plus the grace period.
	if d := deadline.Sub(start); d < 7*time.Second-100*time.Millisecond || d > 7*time.Second+100*time.Millisecond {
		t.Errorf("forward deadline = %v after the start, want 7s", d)
	}

	// bbolt configs and configs that do not load never reach the agent.
	p.Forward = func(context.Context, string, *agentproto.Request) (*agentproto.Response, error) {
		t.Error("forwarded a call that is not datastore kubernetes")
		return nil, errors.New("unexpected")
	}
	h := newHarness(t)
	p.Stdout = h.out
	if err := p.Funcs().Add(&skel.CmdArgs{ContainerID: "c", IfName: "e", StdinData: h.conf(`,"range":"10.5.0.0/24"`, "")}); err != nil {
		t.Fatalf("bbolt ADD = %v", err)
	}
	if !strings.Contains(h.out.String(), "10.5.0.1/24") {
		t.Errorf("bbolt ADD result = %s", h.out)
	}
	wantCode(t, p.Funcs().Add(&skel.CmdArgs{ContainerID: "c", IfName: "e", StdinData: kubeConf("relative.sock", "")}),
		types.ErrInvalidNetworkConfig, `kubernetes.agent_socket "relative.sock": must be an absolute path`)
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("stdout closed") }

func TestForwardStdoutFailure(t *testing.T) {
	p := forwardingPlugin(nil)
	p.Stdout = failingWriter{}
	p.Forward = func(context.Context, string, *agentproto.Request) (*agentproto.Response, error) {
		return &agentproto.Response{Stdout: []byte("{}")}, nil
	}
	wantCode(t, p.Funcs().Add(&skel.CmdArgs{ContainerID: "c", IfName: "e", StdinData: kubeConf("/run/x.sock", "")}),
		types.ErrInternal, "failed to write the agent's result: stdout closed")
}
