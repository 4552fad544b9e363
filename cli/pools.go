package cli

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/netpool/netpool/cli/inventory"
)

func newPools(opts *options) *cobra.Command {
	var (
		network  string
		watch    bool
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "pools",
		Short: "List the pools with their ranges, capacity, used and free addresses",
		Long: `pools lists every pool: its network, range, capacity (the window less exclusions, the gateway
and any network or broadcast address), the addresses held now, the addresses free and the
utilisation. In a cluster the pools are the IPPools and "used" counts their reservations live;
with --db they are the embedded store's pools, each with the range of the last config that
claimed in it (a pool of a file written before netpool recorded ranges shows only its CIDR, and
no capacity, until its next claim). --watch prints the list again whenever it changes, until interrupted.
-o wide adds each pool's window, gateway, number of excluded CIDRs and (in a cluster) its Ready
condition; -o json and -o yaml print the PoolList document of docs/cli-output.md.

    $ netpoolctl pools
    NAME        NETWORK       RANGE           CAPACITY   USED   FREE   UTIL    AGE
    ctlview-a   ctlview-net   10.78.0.0/28    9          2      7      22.2%   10h
    ctlview-b   ctlview-net   fd00:78::/120   255        1      254    0.4%    10h

    $ netpoolctl --db /var/lib/cni/netpool/netpool.db pools -o wide
    $ netpoolctl pools --watch --network ctlview-net`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := parseFormat(opts.output)
			if err != nil {
				return err
			}
			if interval <= 0 {
				return fmt.Errorf("--watch-interval must be positive, not %s", interval)
			}
			embedded, err := opts.embedded()
			if err != nil {
				return err
			}
			// A bbolt file is opened anew for each rendering, so a watch holds its lock only while
			// it reads, never between polls; a cluster's client is made once.
			var cluster inventory.Source
			if !embedded {
				if cluster, err = opts.source(); err != nil {
					return err
				}
				defer cluster.Close()
			}
			render := func(ctx context.Context) ([]byte, error) {
				src := cluster
				if embedded {
					if src, err = opts.source(); err != nil {
						return nil, err
					}
					defer src.Close()
				}
				var b bytes.Buffer
				err := printPools(ctx, &b, f, opts.now(), src, network)
				return b.Bytes(), err
			}
			if !watch {
				out, err := render(cmd.Context())
				if err == nil {
					_, err = cmd.OutOrStdout().Write(out)
				}
				return err
			}
			return watchLoop(cmd.Context(), cmd, interval, render)
		},
	}
	cmd.Flags().StringVar(&network, "network", "", "list only the pools of this network name")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after listing, print the list again whenever it changes")
	cmd.Flags().DurationVar(&interval, "watch-interval", 2*time.Second, "with --watch, how often to look for a change")
	return cmd
}

// watchLoop prints render's output, then again each time it differs, polling every interval,
// until ctx ends (which is not an error). It holds one rendering in memory, whatever runs.
func watchLoop(ctx context.Context, cmd *cobra.Command, interval time.Duration, render func(context.Context) ([]byte, error)) error {
	var last []byte
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		out, err := render(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if !bytes.Equal(out, last) {
			if _, err := cmd.OutOrStdout().Write(out); err != nil {
				return err
			}
			last = out
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func printPools(ctx context.Context, w *bytes.Buffer, f format, now time.Time, src inventory.Source, network string) error {
	pools, err := src.Pools(ctx)
	if err != nil {
		return err
	}
	doc := poolList{docHeader: newDocHeader("PoolList", src), Items: []poolView{}}
	t := &table{columns: []column{
		{header: "name"}, {header: "network"}, {header: "range"}, {header: "capacity"}, {header: "used"},
		{header: "free"}, {header: "util"}, {header: "window", wide: true}, {header: "gateway", wide: true},
		{header: "excluded", wide: true}, {header: "ready", wide: true}, {header: "age"},
	}}
	for _, p := range pools {
		if network != "" && p.Network != network {
			continue
		}
		v := viewOfPool(p)
		doc.Items = append(doc.Items, v)
		window, excluded := "", ""
		if p.Model != nil {
			window = v.RangeStart + "-" + v.RangeEnd
			excluded = fmt.Sprint(len(v.Exclude))
		}
		rng := v.Range
		if rng == "" {
			rng = "<unknown>"
		}
		t.add(v.Name, v.Network, rng, v.Capacity, fmt.Sprint(v.Used), v.Free, utilization(v), window, v.Gateway, excluded, v.Ready, age(now, p.Created))
	}
	return emit(w, f, t, doc)
}
