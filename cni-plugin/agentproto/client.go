package agentproto

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// Transport errors. Both mean the call can be retried: ErrUnreachable says nothing was sent,
// ErrNoAnswer that the request may have been acted on, which an idempotent CNI verb tolerates.
var (
	// ErrUnreachable is returned when the agent's socket cannot be connected to.
	ErrUnreachable = errors.New("netpool agent not reachable")
	// ErrNoAnswer is returned when the connection broke or timed out before a valid answer came.
	ErrNoAnswer = errors.New("netpool agent did not answer")
)

// DialTimeout bounds the connect. A unix connect to a missing or dead socket fails at once; the
// bound only matters when the agent's accept backlog is full.
const DialTimeout = 2 * time.Second

// Call sends req to the agent listening at socket and returns its answer. ctx bounds the whole
// call; without a deadline in ctx the call can wait as long as the agent takes.
func Call(ctx context.Context, socket string, req *Request) (*Response, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: DialTimeout}
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("%w at %s: %w", ErrUnreachable, socket, err)
	}
	defer conn.Close() // the answer has been read in full or the call failed; nothing is left to flush
	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(dl); err != nil {
			return nil, fmt.Errorf("%w at %s: %w", ErrNoAnswer, socket, err)
		}
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) }) // wakes the blocked read
	defer stop()
	if err := encode(conn, req); err != nil {
		return nil, fmt.Errorf("%w at %s: failed to send the request: %w", ErrNoAnswer, socket, err)
	}
	// Half-close tells the agent the request is complete; the answer comes back on the same connection.
	if err := conn.(*net.UnixConn).CloseWrite(); err != nil {
		return nil, fmt.Errorf("%w at %s: failed to send the request: %w", ErrNoAnswer, socket, err)
	}
	resp, err := DecodeResponse(conn)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		case errors.Is(err, os.ErrDeadlineExceeded):
			// The connection's deadline is ctx's and may fire a moment before ctx's own timer.
			err = fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
		}
		return nil, fmt.Errorf("%w at %s: %w", ErrNoAnswer, socket, err)
	}
	return resp, nil
}
