package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/netpool/netpool/test/harness"
)

// warmup calls run before each series and are not counted: they create the files and fill the
// page cache, which the first call of a node pays once.
const warmup = 5

// benchEmpty compares ADD+DEL on an empty /22: netpool must not be slower than host-local.
func benchEmpty(ctx context.Context, e *env) (row, error) {
	const subnet = "10.10.0.0/22"
	dir := filepath.Join(e.dir, "empty")
	np, err := newPlugin("netpool", e.netpool(), "bench-empty",
		harness.NetpoolIPAM(filepath.Join(dir, "netpool", "netpool.db"), map[string]any{"range": subnet}))
	if err != nil {
		return row{}, err
	}
	hl, err := newPlugin("host-local", e.hostLocal(), "bench-empty",
		harness.HostLocalIPAM(filepath.Join(dir, "host-local"), subnet))
	if err != nil {
		return row{}, err
	}
	if _, _, err := alternate(warmup, np.addDel(ctx, "warm"), hl.addDel(ctx, "warm")); err != nil {
		return row{}, err
	}
	sn, sh, err := alternate(e.opts.emptyCalls, np.addDel(ctx, "c"), hl.addDel(ctx, "c"))
	if err != nil {
		return row{}, err
	}
	r := ratio(sn, sh)
	return row{
		name:  fmt.Sprintf("a. ADD+DEL, empty /22 (%d calls)", e.opts.emptyCalls),
		left:  timeSeries("netpool", sn),
		right: timeSeries("host-local", sh),
		ratio: r, target: "<= 1.00", pass: r <= 1.0,
	}, nil
}
