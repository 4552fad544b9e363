package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/netpool/netpool/test/harness"
)

// prefillWorkers is how many ADD processes prefill a plugin at once.
const prefillWorkers = 4

// benchHeld compares ADD+DEL with e.opts.held attachments already made through each plugin's
// binary: netpool must be at least 3x faster, since host-local scans every reservation file to
// find an attachment's address.
func benchHeld(ctx context.Context, e *env) (row, error) {
	const subnet = "10.11.0.0/20"
	dir := filepath.Join(e.dir, "held")
	np, err := newPlugin("netpool", e.netpool(), "bench-held",
		harness.NetpoolIPAM(filepath.Join(dir, "netpool", "netpool.db"), map[string]any{"range": subnet}))
	if err != nil {
		return row{}, err
	}
	hl, err := newPlugin("host-local", e.hostLocal(), "bench-held",
		harness.HostLocalIPAM(filepath.Join(dir, "host-local"), subnet))
	if err != nil {
		return row{}, err
	}
	for _, p := range []plugin{np, hl} {
		if err := prefillBinary(ctx, p, "held", e.opts.held, prefillWorkers); err != nil {
			return row{}, fmt.Errorf("failed to prefill %s: %w", p.name, err)
		}
	}
	if _, _, err := alternate(warmup, np.addDel(ctx, "warm"), hl.addDel(ctx, "warm")); err != nil {
		return row{}, err
	}
	sn, sh, err := alternate(e.opts.heldCalls, np.addDel(ctx, "c"), hl.addDel(ctx, "c"))
	if err != nil {
		return row{}, err
	}
	r := ratio(sn, sh)
	return row{
		name:  fmt.Sprintf("b. ADD+DEL, %d held (%d calls)", e.opts.held, e.opts.heldCalls),
		left:  timeSeries("netpool", sn),
		right: timeSeries("host-local", sh),
		ratio: r, target: "<= 0.33 (3x)", pass: r <= 1.0/3,
	}, nil
}
