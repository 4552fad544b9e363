package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

func listen(p path) (net.Listener, error) {
	var ln net.Listener
	err := p.server.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", p.listen.String())
		return err
	})
	return ln, err
}

func dial(ctx context.Context, p path) (net.Conn, error) {
	var conn net.Conn
	err := p.client.Do(func(ns.NetNS) error {
		d := net.Dialer{Timeout: 2 * time.Second}
		var err error
		conn, err = d.DialContext(ctx, "tcp", p.dial.String())
		return err
	})
	return conn, err
}

// throughput streams from client to server over p for d and returns the bytes per second the
// server received.
func throughput(ctx context.Context, p path, d time.Duration) (float64, error) {
	ln, err := listen(p)
	if err != nil {
		return 0, err
	}
	defer func() { _ = ln.Close() }()
	type result struct {
		n   int64
		err error
	}
	got := make(chan result, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer func() { _ = conn.Close() }()
		n, err := io.Copy(io.Discard, conn)
		got <- result{n: n, err: err}
	}()
	conn, err := dial(ctx, p)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 256<<10)
	start := time.Now()
	deadline := start.Add(d)
	_ = conn.SetWriteDeadline(deadline)
	for time.Now().Before(deadline) {
		if _, err := conn.Write(buf); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				break
			}
			_ = conn.Close()
			return 0, err
		}
	}
	if err := conn.Close(); err != nil {
		return 0, err
	}
	r := <-got
	elapsed := time.Since(start)
	if r.err != nil {
		return 0, r.err
	}
	if r.n == 0 {
		return 0, fmt.Errorf("no bytes arrived")
	}
	return float64(r.n) / elapsed.Seconds(), nil
}

// connectRate opens and closes connections over p from workers goroutines for d, and returns the
// completed connections per second. Connections close with a reset (linger 0) so that TIME_WAIT
// does not run the client out of ports; the measure is the handshake through the path.
func connectRate(ctx context.Context, p path, d time.Duration, workers int) (float64, error) {
	ln, err := listen(p)
	if err != nil {
		return 0, err
	}
	defer func() { _ = ln.Close() }()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.Close()
		}
	}()
	var (
		done     atomic.Int64
		wg       sync.WaitGroup
		firstErr error
		errOnce  sync.Once
	)
	start := time.Now()
	deadline := start.Add(d)
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				conn, err := dial(ctx, p)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				_ = conn.(*net.TCPConn).SetLinger(0)
				_ = conn.Close()
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}
