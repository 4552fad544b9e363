package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/netpool/netpool/test/harness"
)

// benchFill compares netpool's ADD+DEL on a range held at 99% with the same range held at 1%: the
// cost of finding a free address must not grow with the allocations made (within 1.5x). Both
// fills are spread over the whole range (99%: every address but each hundredth; 1%: each
// hundredth), so that the free search at 99% crosses hundreds of allocated runs.
func benchFill(ctx context.Context, e *env) (row, error) {
	full, err := fillPlugin(ctx, e, "full", func(k int) bool { return k%100 != 0 })
	if err != nil {
		return row{}, err
	}
	sparse, err := fillPlugin(ctx, e, "sparse", func(k int) bool { return k%100 == 0 })
	if err != nil {
		return row{}, err
	}
	if _, _, err := alternate(warmup, full.addDel(ctx, "warm"), sparse.addDel(ctx, "warm")); err != nil {
		return row{}, err
	}
	sf, ss, err := alternate(e.opts.fillCalls, full.addDel(ctx, "c"), sparse.addDel(ctx, "c"))
	if err != nil {
		return row{}, err
	}
	r := ratio(sf, ss)
	return row{
		name:  fmt.Sprintf("c. netpool ADD+DEL, %s 99%% vs 1%% held (%d calls)", e.opts.fillRange, e.opts.fillCalls),
		left:  timeSeries(full.name, sf),
		right: timeSeries(sparse.name, ss),
		ratio: r, target: "<= 1.50", pass: r <= 1.5,
	}, nil
}

// fillPlugin returns netpool on a fresh file whose range e.opts.fillRange holds the k-th address
// for every k that hold accepts; its name tells the fill.
func fillPlugin(ctx context.Context, e *env, name string, hold func(k int) bool) (plugin, error) {
	db := filepath.Join(e.dir, "fill-"+name, "netpool.db")
	p, err := newPlugin("netpool", e.netpool(), "bench-fill",
		harness.NetpoolIPAM(db, map[string]any{"range": e.opts.fillRange}))
	if err != nil {
		return plugin{}, err
	}
	held, capacity, err := prefillStore(ctx, p.conf, hold)
	if err != nil {
		return plugin{}, err
	}
	p.name = fmt.Sprintf("%.0f%% (%d/%d)", 100*float64(held)/float64(capacity), held, capacity)
	return p, nil
}
