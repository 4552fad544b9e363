package agentproto

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"
)

// codeInternal is the CNI spec's code for an error with no better code (999).
const codeInternal = 999

// ReadTimeout bounds how long the agent waits for a connected plugin to send its request, so a
// stuck client cannot hold a goroutine for ever.
const ReadTimeout = 10 * time.Second

// Handler answers one request. It must not return nil.
type Handler func(ctx context.Context, req *Request) *Response

// Server answers requests on a listener, one goroutine per connection.
type Server struct {
	Handler Handler
	// Log receives transport failures; nil discards them.
	Log *slog.Logger
}

// Serve accepts connections until ctx is done or ln fails, then closes ln and returns once every
// call in flight has been answered. The ctx given to the Handler is not cancelled by shutdown: a
// call that has started runs to its end, so it leaves nothing half-made.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() }) // Accept returns net.ErrClosed
	defer stop()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				_ = ln.Close() // already closed by the AfterFunc or by the caller
				return nil
			}
			return fmt.Errorf("failed to accept on %s: %w", ln.Addr(), err)
		}
		wg.Go(func() { s.serveConn(context.WithoutCancel(ctx), conn) })
	}
}

func (s *Server) serveConn(ctx context.Context, conn net.Conn) {
	defer conn.Close() // the answer is written or the client is gone; a close error changes nothing
	if err := conn.SetReadDeadline(time.Now().Add(ReadTimeout)); err != nil {
		s.logf("Setting read deadline failed", err)
		return
	}
	resp := &Response{}
	req, err := DecodeRequest(conn)
	if err != nil {
		resp.Error = &Error{Code: codeInternal, Msg: "netpool agent rejected the request", Details: err.Error()}
	} else {
		resp = s.handle(ctx, req)
	}
	if err := conn.SetWriteDeadline(time.Now().Add(ReadTimeout)); err != nil {
		s.logf("Setting write deadline failed", err)
		return
	}
	if err := encode(conn, resp); err != nil {
		// The plugin sees ErrNoAnswer and fails with "try again later"; CNI verbs are idempotent.
		s.logf("Writing response failed", err)
	}
}

// handle runs the Handler, turning a panic into a CNI error so one bad call cannot take down
// the agent every pod on the node depends on.
func (s *Server) handle(ctx context.Context, req *Request) (resp *Response) {
	defer func() {
		if p := recover(); p != nil {
			if s.Log != nil {
				s.Log.Error("Handling request panicked", "verb", req.Verb, "containerID", req.ContainerID,
					"panic", p, "stack", string(debug.Stack()))
			}
			resp = &Response{Error: &Error{Code: codeInternal, Msg: fmt.Sprintf("netpool agent failed on %s: %v", req.Verb, p)}}
		}
	}()
	resp = s.Handler(ctx, req)
	if resp == nil {
		resp = &Response{Error: &Error{Code: codeInternal, Msg: "netpool agent returned no answer for " + req.Verb}}
	}
	return resp
}

func (s *Server) logf(msg string, err error) {
	if s.Log != nil {
		s.Log.Error(msg, "err", err)
	}
}

// Listen listens on the unix socket at path, creating its directory. A socket file left behind
// by an agent that died is removed; a live agent on the same path is an error, and so is any
// other kind of file there. The socket is accessible to its owner only (the runtime runs as root).
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("failed to create socket directory for %s: %w", path, err)
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("failed to inspect %s: %w", path, err)
	case fi.Mode().Type() != fs.ModeSocket:
		return nil, fmt.Errorf("%s exists and is not a socket (%s); remove it or choose another path", path, fi.Mode().Type())
	default:
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			_ = c.Close() // only probing
			return nil, fmt.Errorf("another agent is already listening at %s", path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("failed to remove stale socket %s: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("failed to listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close() // the chmod error is the one worth reporting
		return nil, fmt.Errorf("failed to restrict %s: %w", path, err)
	}
	return ln, nil
}
