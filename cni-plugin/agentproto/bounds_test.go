package agentproto

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netpool/netpool/test/poll"
)

// TestServerBoundsConnections holds every handler until the test lets go: no more than MaxConns
// calls may be in the agent at once, and the connections beyond wait (in the backlog) and are
// answered once a slot frees.
func TestServerBoundsConnections(t *testing.T) {
	const maxConns, extra = 4, 3
	var inside, peak atomic.Int32
	release := make(chan struct{})
	path := socketPath(t)
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- (&Server{MaxConns: maxConns, Handler: func(context.Context, *Request) *Response {
			n := inside.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			<-release
			inside.Add(-1)
			return &Response{Stdout: []byte("ok")}
		}}).Serve(ctx, ln)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve() = %v", err)
		}
	}()

	var wg sync.WaitGroup
	answers := make(chan string, maxConns+extra)
	for range maxConns + extra {
		wg.Go(func() {
			resp, err := Call(context.Background(), path, addReq())
			if err != nil {
				answers <- err.Error()
				return
			}
			answers <- string(resp.Stdout)
		})
	}
	poll.Eventually(t, 10*time.Second, "the bound's calls reach the handler", func() error {
		if n := inside.Load(); n < maxConns {
			return fmt.Errorf("only %d of %d calls reached the handler", n, maxConns)
		}
		return nil
	})
	// Give the extra connections every chance to get in if the bound does not hold.
	time.Sleep(300 * time.Millisecond)
	if n := inside.Load(); n != maxConns {
		t.Errorf("%d calls in the handler at once, want at most %d", n, maxConns)
	}
	close(release)
	wg.Wait()
	close(answers)
	for a := range answers {
		if a != "ok" {
			t.Errorf("call answered %q, want ok", a)
		}
	}
	if p := peak.Load(); p > maxConns {
		t.Errorf("peak of %d calls in the handler, want at most %d", p, maxConns)
	}
}

// TestServerBoundsFrameMemory sends 30 requests of the largest size (about 4 MiB) at once (60 took an unbounded agent
// to about 670 MiB) and samples the heap while the agent reads them. Every
// client writes the same encoded frame, so the clients' side costs one frame.
func TestServerBoundsFrameMemory(t *testing.T) {
	const clients = 30
	// The bound is what the server may hold (DefaultMaxLargeFrames frames, their copies and the
	// small frames), with room for the garbage the collector has not reclaimed yet.
	const limit = 96 << 20
	defer debug.SetGCPercent(debug.SetGCPercent(25))

	req := addReq()
	// The largest config a request may carry, so each frame is as large as the agent accepts.
	const shell = `{"name":"n","pad":""}`
	req.Stdin = []byte(`{"name":"n","pad":"` + strings.Repeat("x", MaxStdinSize-len(shell)) + `"}`)
	frame, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(frame) < MaxMessageSize-envelopeReserve || len(frame) > MaxMessageSize {
		t.Fatalf("frame is %d bytes, want within %d of %d", len(frame), envelopeReserve, MaxMessageSize)
	}
	path := socketPath(t)
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// Reading 30 frames four at a time takes seconds on a loaded machine under the race
	// detector: a long read timeout keeps the test about memory.
	srv := &Server{ReadTimeout: 5 * time.Minute, Handler: func(_ context.Context, r *Request) *Response {
		return &Response{Stdout: fmt.Appendf(nil, "%d", len(r.Stdin))}
	}}
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve() = %v", err)
		}
	}()

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Go(func() { errs <- sendFrame(path, frame, len(req.Stdin)) })
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	grew := int64(peak.Load()) - int64(base.HeapAlloc)
	t.Logf("heap grew by %d MiB at most while reading %d frames of %d KiB", grew>>20, clients, len(frame)>>10)
	if grew > limit {
		t.Errorf("heap grew by %d MiB, want at most %d MiB", grew>>20, limit>>20)
	}
}

// sendFrame writes frame as one request and checks the answer is the Stdin size.
func sendFrame(path string, frame []byte, stdinLen int) error {
	conn, err := net.Dial("unix", path)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Minute)); err != nil {
		return err
	}
	if _, err := conn.Write(frame); err != nil {
		return fmt.Errorf("writing the frame: %w", err)
	}
	if err := conn.(*net.UnixConn).CloseWrite(); err != nil {
		return err
	}
	resp, err := DecodeResponse(conn)
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	if resp.Error != nil || string(resp.Stdout) != fmt.Sprint(stdinLen) {
		return fmt.Errorf("answer %+v %q, want stdout %d", resp.Error, resp.Stdout, stdinLen)
	}
	return nil
}

// TestReadFrameWaitsForLargeSlot reads a large frame while the only large-frame slot is taken:
// it waits until the read deadline and fails with errBusy, which the server answers with "try
// again later". Once the slot is free, the same read takes it, and release gives it back.
func TestReadFrameWaitsForLargeSlot(t *testing.T) {
	large := make(chan struct{}, 1)
	large <- struct{}{} // another large request is being read
	payload := []byte(strings.Repeat("y", SmallFrameSize+1))
	send := func() net.Conn {
		client, server := net.Pipe()
		go func() {
			_, _ = client.Write(payload)
			_ = client.Close()
		}()
		return server
	}
	conn := send()
	start := time.Now()
	_, _, err := readFrame(conn, large, time.Now().Add(100*time.Millisecond))
	if !errors.Is(err, errBusy) || !strings.Contains(err.Error(), "1 requests larger than 65536 bytes are being read") {
		t.Fatalf("readFrame with no large slot = %v, want errBusy", err)
	}
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Errorf("readFrame gave up after %s, before its deadline", waited)
	}
	_ = conn.Close()

	<-large // the other request is done
	b, release, err := readFrame(send(), large, time.Now().Add(5*time.Second))
	if err != nil || len(b) != len(payload) {
		t.Fatalf("readFrame = %d bytes, %v; want %d bytes", len(b), err, len(payload))
	}
	if len(large) != 1 {
		t.Errorf("%d large slots taken while reading, want 1", len(large))
	}
	release()
	if len(large) != 0 {
		t.Errorf("%d large slots taken after release, want 0", len(large))
	}
}

// TestReadFrameSmallTakesNoSlot reads a frame of SmallFrameSize bytes with every large slot taken.
func TestReadFrameSmallTakesNoSlot(t *testing.T) {
	large := make(chan struct{}, 1)
	large <- struct{}{}
	client, server := net.Pipe()
	go func() {
		_, _ = client.Write([]byte(strings.Repeat("z", SmallFrameSize)))
		_ = client.Close()
	}()
	b, release, err := readFrame(server, large, time.Now().Add(time.Second))
	if err != nil || len(b) != SmallFrameSize {
		t.Fatalf("readFrame = %d bytes, %v", len(b), err)
	}
	release()
	if len(large) != 1 {
		t.Error("a small frame's release gave back a slot it never took")
	}
}
