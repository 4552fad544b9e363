package agentproto

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"time"
)

// CNI spec codes the server answers with on its own.
const (
	// codeInternal is the code for an error with no better code (999).
	codeInternal = 999
	// codeTryAgain is "try again later" (11): the agent is too busy to read the request now.
	codeTryAgain = 11
)

// Bounds of what the server holds at once (Server's defaults). A request's memory is its frame
// read whole, then a copy decoded from it, so what the agent can be made to hold is about
// DefaultMaxConns*SmallFrameSize*4 plus DefaultMaxLargeFrames*MaxMessageSize*4: some 80 MiB,
// where 60 unbounded 4 MiB frames peaked near 670 MiB.
const (
	// DefaultMaxConns is how many connections are served at once. More wait in the socket's
	// accept backlog (the plugin's connect and its call deadline bound that wait).
	DefaultMaxConns = 64
	// DefaultMaxLargeFrames is how many requests larger than SmallFrameSize are read at once.
	DefaultMaxLargeFrames = 4
	// SmallFrameSize is the size up to which a request is read without taking a large-frame
	// slot. A network config with a prevResult is a few KiB.
	SmallFrameSize = 64 << 10
)

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
	// MaxConns bounds the connections served at once; 0 means DefaultMaxConns. The server does
	// not accept more until one ends.
	MaxConns int
	// MaxLargeFrames bounds the requests larger than SmallFrameSize read at once; 0 means
	// DefaultMaxLargeFrames. A large request waits for a slot until its read deadline, then
	// gets "try again later".
	MaxLargeFrames int
	// ReadTimeout bounds how long a connection may take to deliver its request, a wait for a
	// large-frame slot included; 0 means ReadTimeout.
	ReadTimeout time.Duration
}

// limit returns n, or def when n is not positive.
func limit(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// Serve accepts connections until ctx is done or ln fails, then closes ln and returns once every
// call in flight has been answered. The ctx given to the Handler is not cancelled by shutdown: a
// call that has started runs to its end, so it leaves nothing half-made.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() }) // Accept returns net.ErrClosed
	defer stop()
	conns := make(chan struct{}, limit(s.MaxConns, DefaultMaxConns))
	large := make(chan struct{}, limit(s.MaxLargeFrames, DefaultMaxLargeFrames))
	for {
		// A connection slot is taken before Accept, so connections beyond the bound wait in the
		// kernel's backlog rather than in the agent's memory.
		select {
		case conns <- struct{}{}:
		case <-ctx.Done():
			_ = ln.Close() // already closed by the AfterFunc
			return nil
		}
		conn, err := ln.Accept()
		if err != nil {
			<-conns
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				_ = ln.Close() // already closed by the AfterFunc or by the caller
				return nil
			}
			return fmt.Errorf("failed to accept on %s: %w", ln.Addr(), err)
		}
		wg.Go(func() {
			defer func() { <-conns }()
			s.serveConn(context.WithoutCancel(ctx), conn, large)
		})
	}
}

func (s *Server) serveConn(ctx context.Context, conn net.Conn, large chan struct{}) {
	defer conn.Close() // the answer is written or the client is gone; a close error changes nothing
	deadline := time.Now().Add(cmp.Or(s.ReadTimeout, ReadTimeout))
	if err := conn.SetReadDeadline(deadline); err != nil {
		s.logf("Setting read deadline failed", err)
		return
	}
	resp := &Response{}
	frame, release, err := readFrame(conn, large, deadline)
	switch {
	case errors.Is(err, errBusy):
		resp.Error = &Error{Code: codeTryAgain, Msg: "netpool agent is busy", Details: err.Error()}
	case err != nil:
		resp.Error = &Error{Code: codeInternal, Msg: "netpool agent rejected the request", Details: err.Error()}
	default:
		req, err := DecodeRequest(bytes.NewReader(frame))
		// The frame is dead from here on (the request holds copies): its slot goes back before the call runs.
		release()
		if err != nil {
			resp.Error = &Error{Code: codeInternal, Msg: "netpool agent rejected the request", Details: err.Error()}
		} else {
			resp = s.handle(ctx, req)
		}
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

// errBusy is returned by readFrame when no large-frame slot came free in time.
var errBusy = errors.New("every large-request slot is taken")

// readFrame reads one request frame of at most MaxMessageSize+1 bytes (DecodeRequest rejects
// the extra byte). Up to SmallFrameSize it reads freely; a larger frame first takes a slot of
// large, waiting for one until deadline, and release gives the slot back.
func readFrame(conn net.Conn, large chan struct{}, deadline time.Time) ([]byte, func(), error) {
	b, err := io.ReadAll(io.LimitReader(conn, SmallFrameSize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read agent message: %w", err)
	}
	if len(b) <= SmallFrameSize {
		return b, func() {}, nil
	}
	wait := time.NewTimer(time.Until(deadline))
	defer wait.Stop()
	select {
	case large <- struct{}{}:
	case <-wait.C:
		return nil, nil, fmt.Errorf("%w: %d requests larger than %d bytes are being read; try again", errBusy, cap(large), SmallFrameSize)
	}
	release := func() { <-large }
	rest, err := io.ReadAll(io.LimitReader(conn, MaxMessageSize+1-int64(len(b))))
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("failed to read agent message: %w", err)
	}
	return append(b, rest...), release, nil
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
