package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/netpool/netpool/test/harness"
)

// rssLimitKiB is the most one netpool ADD may take, as peak RSS, on any range size.
const rssLimitKiB = 30 * 1024

// benchRSS measures the peak RSS of netpool ADDs on a huge range (host-local on the same range is
// printed beside it for reference): it must stay under 30 MiB, because nothing the plugin does
// may grow with the size of the range.
func benchRSS(ctx context.Context, e *env, label, subnet string) (row, error) {
	dir := filepath.Join(e.dir, "rss-"+label)
	np, err := newPlugin("netpool", e.netpool(), "bench-rss",
		harness.NetpoolIPAM(filepath.Join(dir, "netpool", "netpool.db"), map[string]any{"range": subnet}))
	if err != nil {
		return row{}, err
	}
	hl, err := newPlugin("host-local", e.hostLocal(), "bench-rss",
		harness.HostLocalIPAM(filepath.Join(dir, "host-local"), subnet))
	if err != nil {
		return row{}, err
	}
	var kn, kh []int64
	for i := range e.opts.rssRuns {
		for _, p := range []plugin{np, hl} {
			kib, err := measureRSS(ctx, e.probe, p.bin, harness.Invocation{
				Command: "ADD", ContainerID: fmt.Sprintf("rss-%03d", i), IfName: "eth0", Config: p.conf,
			})
			if err != nil {
				return row{}, err
			}
			if p.name == np.name {
				kn = append(kn, kib)
			} else {
				kh = append(kh, kib)
			}
		}
	}
	peak := quantile(kn, 1)
	return row{
		name:  fmt.Sprintf("d. peak RSS of one ADD, %s %s (%d runs)", label, subnet, e.opts.rssRuns),
		left:  rssSeries("netpool", kn),
		right: rssSeries("host-local", kh),
		ratio: float64(peak) / rssLimitKiB, target: "max < 30 MiB", pass: peak < rssLimitKiB,
	}, nil
}

// probeFloor returns the peak RSS the probe reports for a program that does nothing: no figure
// below it can be told apart.
func probeFloor(ctx context.Context, probe string) (int64, error) {
	return measureRSS(ctx, probe, "/bin/true", harness.Invocation{Command: "VERSION"})
}
