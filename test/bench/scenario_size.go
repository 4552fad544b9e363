package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/netpool/netpool/test/harness"
)

// benchSize compares netpool's ADD+DEL on a store of about 10 MiB in use with the same on a store
// of a few allocations. Before bbolt maps a file netpool walks every page it uses (a cycle of
// pages would otherwise overflow bbolt's stack), a few milliseconds at 10 MiB; the walk is skipped
// for the state the last call left behind, so a call's cost must not grow with the file (within
// 1.25x, what bbolt's deeper trees and larger freelist cost).
func benchSize(ctx context.Context, e *env) (row, error) {
	big, err := sizePlugin(ctx, e, "big", e.opts.sizeHeld)
	if err != nil {
		return row{}, err
	}
	small, err := sizePlugin(ctx, e, "small", 10)
	if err != nil {
		return row{}, err
	}
	if _, _, err := alternate(warmup, big.addDel(ctx, "warm"), small.addDel(ctx, "warm")); err != nil {
		return row{}, err
	}
	sb, ss, err := alternate(e.opts.sizeCalls, big.addDel(ctx, "c"), small.addDel(ctx, "c"))
	if err != nil {
		return row{}, err
	}
	r := ratio(sb, ss)
	return row{
		name:  fmt.Sprintf("e. netpool ADD+DEL, a big store vs a small one (%d calls)", e.opts.sizeCalls),
		left:  timeSeries(big.name, sb),
		right: timeSeries(small.name, ss),
		ratio: r, target: "<= 1.25", pass: r <= 1.25,
	}, nil
}

// sizePlugin returns netpool on a fresh file of a /16 holding n allocations; its name tells the
// pages in use.
func sizePlugin(ctx context.Context, e *env, name string, n int) (plugin, error) {
	db := filepath.Join(e.dir, "size-"+name, "netpool.db")
	p, err := newPlugin("netpool", e.netpool(), "bench-size",
		harness.NetpoolIPAM(db, map[string]any{"range": "10.30.0.0/16"}))
	if err != nil {
		return plugin{}, err
	}
	if _, _, err := prefillStore(ctx, p.conf, func(k int) bool { return k < n }); err != nil {
		return plugin{}, err
	}
	image, err := os.ReadFile(db)
	if err != nil {
		return plugin{}, err
	}
	used, err := harness.BboltUsedBytes(image)
	if err != nil {
		return plugin{}, err
	}
	p.name = fmt.Sprintf("%s (%d held)", usedSize(used), n)
	return p, nil
}

// usedSize formats the bytes in use of a store.
func usedSize(n int) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
