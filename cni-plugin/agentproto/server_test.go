package agentproto

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netpool/netpool/test/harness"
	"github.com/netpool/netpool/test/poll"
)

// acceptAndClose answers every connection to ln by closing it, until ln is closed: a listener
// that is alive but says nothing.
func acceptAndClose(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_ = c.Close()
	}
}

func socketPath(t *testing.T) string {
	t.Helper()
	// Unix socket paths are limited to 108 bytes; t.TempDir() can be longer.
	dir, err := os.MkdirTemp("", "np")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "run", "agent.sock")
}

// serve starts a Server with h on a fresh socket and stops it when the test ends.
func serve(t *testing.T, h Handler, log *slog.Logger) string {
	t.Helper()
	path := socketPath(t)
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&Server{Handler: h, Log: log}).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve() = %v", err)
		}
	})
	return path
}

func addReq() *Request {
	return &Request{Verb: VerbAdd, ContainerID: "c1", IfName: "eth0", Netns: "/ns", Args: "A=B", Path: "/bin",
		NetnsOverride: "1", Stdin: []byte(`{"name":"n"}`)}
}

func TestCallRoundTrip(t *testing.T) {
	got := make(chan *Request, 2)
	path := serve(t, func(_ context.Context, r *Request) *Response {
		got <- r
		if r.IfName == "bad" {
			return &Response{Error: &Error{Code: 100, Msg: "pool exhausted", Details: "d"}}
		}
		return &Response{Stdout: []byte(`{"ips":[]}`)}
	}, nil)
	resp, err := Call(context.Background(), path, addReq())
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Stdout) != `{"ips":[]}` || resp.Error != nil {
		t.Errorf("response = %+v", resp)
	}
	if r := <-got; !reflect.DeepEqual(r, addReq()) {
		t.Errorf("agent received %+v, want %+v", r, addReq())
	}
	bad := addReq()
	bad.IfName = "bad"
	resp, err = Call(context.Background(), path, bad)
	if err != nil || resp.Error == nil || *resp.Error != (Error{Code: 100, Msg: "pool exhausted", Details: "d"}) {
		t.Errorf("error response = %+v, %v", resp, err)
	}
}

func TestCallUnreachable(t *testing.T) {
	path := socketPath(t)
	start := time.Now()
	_, err := Call(context.Background(), path, addReq())
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "netpool agent not reachable at "+path) {
		t.Fatalf("Call() = %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("failing on a missing socket took %v", d)
	}
	// A socket file with no listener behind it (an agent that died) is refused at once as well.
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(interface{ SetUnlinkOnClose(bool) }).SetUnlinkOnClose(false)
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Call(context.Background(), path, addReq()); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Call() on a dead socket = %v", err)
	}
}

func TestCallRejectsInvalidRequest(t *testing.T) {
	if _, err := Call(context.Background(), "/nonexistent", &Request{Verb: "nope"}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Call() = %v", err)
	}
	big := addReq()
	big.Stdin = bytes.Repeat([]byte("x"), MaxMessageSize)
	path := serve(t, func(context.Context, *Request) *Response { return &Response{} }, nil)
	// Too large to ever fit one message: refused before anything is sent, not a transport failure.
	if _, err := Call(context.Background(), path, big); !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrNoAnswer) {
		t.Fatalf("Call() with an oversized request = %v", err)
	}
}

func TestCallTimesOut(t *testing.T) {
	release := make(chan struct{})
	path := serve(t, func(context.Context, *Request) *Response {
		<-release
		return &Response{}
	}, nil)
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Call(ctx, path, addReq())
	if !errors.Is(err, ErrNoAnswer) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Call() = %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a 200ms call took %v", d)
	}
	// Cancellation without a deadline wakes the blocked read too.
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := Call(ctx, path, addReq()); !errors.Is(err, ErrNoAnswer) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Call() = %v", err)
	}
}

func TestCallGarbageAnswer(t *testing.T) {
	path := socketPath(t)
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = DecodeRequest(c)
		_, _ = c.Write([]byte("HTTP/1.1 400 nope\r\n")) // not an agent
		_ = c.Close()
	}()
	if _, err := Call(context.Background(), path, addReq()); !errors.Is(err, ErrNoAnswer) || !errors.Is(err, ErrMalformed) {
		t.Fatalf("Call() = %v", err)
	}
}

func TestServerErrorsAreCNIErrors(t *testing.T) {
	var logBuf harness.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	path := serve(t, func(_ context.Context, r *Request) *Response {
		switch r.ContainerID {
		case "panic":
			panic("boom")
		case "nil":
			return nil
		}
		return &Response{Stdout: []byte("ok")}
	}, log)

	for id, want := range map[string]string{"panic": "netpool agent failed on ADD: boom", "nil": "netpool agent returned no answer for ADD"} {
		r := addReq()
		r.ContainerID = id
		resp, err := Call(context.Background(), path, r)
		if err != nil || resp.Error == nil || resp.Error.Code != codeInternal || resp.Error.Msg != want {
			t.Errorf("%s: response = %+v, %v", id, resp, err)
		}
	}
	if !strings.Contains(logBuf.String(), "Handling request panicked") {
		t.Errorf("log = %q", logBuf.String())
	}
	// A malformed request is answered, not dropped, and the server goes on serving.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte(`{"verb":"FOO","stdin":"e30="}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.UnixConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, err := DecodeResponse(c)
	_ = c.Close()
	if err != nil || resp.Error == nil || resp.Error.Code != codeInternal || !strings.Contains(resp.Error.Details, `verb "FOO"`) {
		t.Errorf("malformed request: response = %+v, %v", resp, err)
	}
	if resp, err := Call(context.Background(), path, addReq()); err != nil || string(resp.Stdout) != "ok" {
		t.Errorf("after errors: %+v, %v", resp, err)
	}
}

func TestServerLogsWriteFailure(t *testing.T) {
	var logBuf harness.SyncBuffer
	handled, clientGone := make(chan struct{}), make(chan struct{})
	path := serve(t, func(context.Context, *Request) *Response {
		<-clientGone // answer only once the client has closed its end
		defer close(handled)
		return &Response{Stdout: bytes.Repeat([]byte("x"), 1<<20)}
	}, slog.New(slog.NewTextHandler(&logBuf, nil)))
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if err := encode(c, addReq()); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	close(clientGone)
	<-handled
	poll.Eventually(t, 5*time.Second, "the failed write is logged", func() error {
		if log := logBuf.String(); !strings.Contains(log, "Writing response failed") {
			return fmt.Errorf("log = %q", log)
		}
		return nil
	})
}

func TestServeWaitsForCallsInFlight(t *testing.T) {
	path := socketPath(t)
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- (&Server{Handler: func(hctx context.Context, _ *Request) *Response {
			close(started)
			<-release // in flight until the test has seen the shutdown begin
			defer finished.Store(true)
			if hctx.Err() != nil {
				return &Response{Error: &Error{Code: 999, Msg: "handler context cancelled by shutdown"}}
			}
			return &Response{Stdout: []byte("done")}
		}}).Serve(ctx, ln)
	}()
	result := make(chan string, 1)
	go func() {
		resp, err := Call(context.Background(), path, addReq())
		if err != nil {
			result <- err.Error()
			return
		}
		result <- string(resp.Stdout)
	}()
	<-started
	cancel()
	// The shutdown has begun once the socket refuses new calls; Serve must still wait for the
	// call in flight.
	poll.Eventually(t, 5*time.Second, "the socket refuses calls once the shutdown began", func() error {
		c, err := net.Dial("unix", path)
		if err != nil {
			return nil
		}
		_ = c.Close()
		return errors.New("the socket still accepts")
	})
	select {
	case err := <-done:
		t.Fatalf("Serve returned (%v) while a call was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Serve() = %v", err)
	}
	if !finished.Load() {
		t.Error("Serve returned before the call in flight was answered")
	}
	if r := <-result; r != "done" {
		t.Errorf("call in flight got %q", r)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind after shutdown: %v", err)
	}
}

type fakeListener struct {
	conns chan net.Conn
	err   error
}

func (l *fakeListener) Accept() (net.Conn, error) {
	if c, ok := <-l.conns; ok {
		return c, nil
	}
	return nil, l.err
}
func (l *fakeListener) Close() error   { return nil }
func (l *fakeListener) Addr() net.Addr { return &net.UnixAddr{Name: "fake", Net: "unix"} }

type deadlineFailConn struct{ net.Conn }

func (deadlineFailConn) SetReadDeadline(time.Time) error { return errors.New("no deadlines here") }
func (deadlineFailConn) Close() error                    { return nil }

func TestServeAcceptAndDeadlineErrors(t *testing.T) {
	var logBuf harness.SyncBuffer
	ln := &fakeListener{conns: make(chan net.Conn, 1), err: errors.New("too many open files")}
	ln.conns <- deadlineFailConn{}
	close(ln.conns)
	err := (&Server{Handler: func(context.Context, *Request) *Response { return &Response{} }, Log: slog.New(slog.NewTextHandler(&logBuf, nil))}).
		Serve(context.Background(), ln)
	if err == nil || !strings.Contains(err.Error(), "failed to accept on fake: too many open files") {
		t.Fatalf("Serve() = %v", err)
	}
	if !strings.Contains(logBuf.String(), "Setting read deadline failed") {
		t.Errorf("log = %q", logBuf.String())
	}
}

func TestListen(t *testing.T) {
	t.Run("stale socket is removed", func(t *testing.T) {
		path := socketPath(t)
		ln, err := Listen(path)
		if err != nil {
			t.Fatal(err)
		}
		ln.(interface{ SetUnlinkOnClose(bool) }).SetUnlinkOnClose(false) // as a kill -9 leaves it
		_ = ln.Close()
		ln, err = Listen(path)
		if err != nil {
			t.Fatalf("Listen() over a stale socket = %v", err)
		}
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("socket mode = %v, %v", fi.Mode(), err)
		}
		_ = ln.Close()
	})
	t.Run("live agent is not replaced", func(t *testing.T) {
		path := socketPath(t)
		ln, err := Listen(path)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go acceptAndClose(ln)
		if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "another agent is already listening at "+path) {
			t.Fatalf("Listen() = %v", err)
		}
	})
	t.Run("other file is not removed", func(t *testing.T) {
		path := socketPath(t)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "exists and is not a socket") {
			t.Fatalf("Listen() = %v", err)
		}
		if b, _ := os.ReadFile(path); string(b) != "keep" {
			t.Error("Listen() touched a regular file")
		}
	})
	t.Run("directory cannot be made", func(t *testing.T) {
		if _, err := Listen("/proc/version/agent.sock"); err == nil || !strings.Contains(err.Error(), "failed to create socket directory") {
			t.Fatalf("Listen() = %v", err)
		}
	})
	t.Run("path cannot be inspected", func(t *testing.T) {
		path := socketPath(t)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		long := filepath.Join(filepath.Dir(path), strings.Repeat("s", 300))
		if _, err := Listen(long); err == nil || !strings.Contains(err.Error(), "failed to inspect") {
			t.Fatalf("Listen() = %v", err)
		}
	})
	t.Run("path too long for a socket", func(t *testing.T) {
		path := socketPath(t)
		long := filepath.Join(filepath.Dir(path), strings.Repeat("s", 120))
		if _, err := Listen(long); err == nil || !strings.Contains(err.Error(), "failed to listen on") {
			t.Fatalf("Listen() = %v", err)
		}
	})
}
