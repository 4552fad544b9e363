package cli

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/netpool/netpool/cli/inventory"
)

func newPools(opts *options) *cobra.Command {
	var (
		network  string
		watch    bool
		count    bool
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "pools",
		Short: "List the pools with their ranges, capacity, used and free addresses",
		Long: `pools lists every pool: its network name, range, capacity (the window less exclusions, the
gateway and any network or broadcast address), the addresses held now, the addresses free, the
utilisation and (in a cluster) its Ready condition as the controller last wrote it, "False
(PoolExhausted)" for a pool with no address left, which UTIL says too ("100.0% (Exhausted)"). In a cluster the pools are the IPPools and
"used" is the controller's count of their reservations (status.allocated, written at most a
second after a change), so the list costs one request however many addresses the cluster holds;
--count counts every reservation now instead (one list of all of them), as --watch does (its
informer holds the reservations); a pool that has no count yet (the controller has not counted
it) is counted now from its own reservations, which the API server selects on spec.pool. json says which in each pool's usedFrom. With --db they are the embedded store's pools, each with
the range of the last config that claimed in it (a pool of a file written before netpool recorded
ranges shows only its CIDR, and no capacity, until its next claim). Counts of more than six
digits print to three significant digits (18.4E for an IPv6 /64); json and yaml keep them exact.
-o wide adds each pool's window, gateway and number of excluded CIDRs; -o json and -o yaml print
the PoolList document of docs/cli-output.md; --network with a name no pool has is an error.

--watch (-w) lists the pools, then prints a pool's row again each time something but its AGE
changes: in a cluster from watch events of the IPPools and reservations (no polling), with --db
by reading the file every --watch-interval. The header is printed once.

    $ netpoolctl pools
    NAME        NETWORK       RANGE           CAPACITY   USED   FREE   UTIL    READY   AGE
    ctlview-a   ctlview-net   10.78.0.0/28    9          2      7      22.2%   True    10h
    ctlview-b   ctlview-net   fd00:78::/120   255        1      254    0.4%    <none>  10h

    $ netpoolctl --db /var/lib/cni/netpool/netpool.db pools -o wide
    $ netpoolctl pools --watch --network ctlview-net
    $ netpoolctl pools -o jsonpath='{range .items[*]}{.name}{"\t"}{.free}{"\n"}{end}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pr, err := opts.print.printer()
			if err != nil {
				return err
			}
			render := func(ctx context.Context, src inventory.Source) (output, error) {
				return poolsOutput(ctx, opts.now(), src, network, cmd.Flags().Changed("network"))
			}
			if watch {
				return runWatch(cmd, opts, pr, interval, watchScope{}, render)
			}
			src, err := opts.source()
			if err != nil {
				return err
			}
			defer src.Close()
			if c, ok := src.(*inventory.Cluster); ok {
				c.LiveCounts = count
			}
			out, err := render(cmd.Context(), src)
			if err != nil {
				return err
			}
			return pr.print(cmd.OutOrStdout(), out)
		},
	}
	cmd.Flags().StringVar(&network, "network", "", "list only the pools of this network name")
	cmd.Flags().BoolVar(&count, "count", false, "count every pool's reservations now instead of taking the controller's status.allocated")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after listing, print a pool's row again whenever it changes")
	cmd.Flags().DurationVar(&interval, "watch-interval", 2*time.Second, "with --watch and --db, how often to read the file for a change")
	registerCompletion(cmd, opts, "network", completeNetworks)
	return cmd
}

// poolColumns are the columns of pools; ageColumn is AGE's index, which a watch leaves out when it
// compares rows.
var poolColumns = []column{
	{header: "name"}, {header: "network"}, {header: "range"}, {header: "capacity"}, {header: "used"},
	{header: "free"}, {header: "util"}, {header: "ready"}, {header: "window", wide: true}, {header: "gateway", wide: true},
	{header: "excluded", wide: true}, {header: "age"},
}

func poolsOutput(ctx context.Context, now time.Time, src inventory.Source, network string, oneNetwork bool) (output, error) {
	pools, err := src.Pools(ctx)
	if err != nil {
		return output{}, err
	}
	if oneNetwork {
		if err := knownNetwork(pools, network, src.Kind()); err != nil {
			return output{}, err
		}
	}
	doc := poolList{docHeader: newDocHeader("PoolList", src), Items: []poolView{}}
	t := &table{columns: poolColumns}
	for _, p := range pools {
		if oneNetwork && p.Network != network {
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
		t.addNamed(poolObjectName(src, v.Name), v.Name, v.Network, rng, humanCount(v.Capacity), fmt.Sprint(v.Used), humanCount(v.Free),
			utilization(v), v.Ready, window, v.Gateway, excluded, age(now, p.Created))
	}
	return output{doc: &doc, items: "items", table: t}, nil
}

// poolObjectName is what -o name prints for a pool: the IPPool as kubectl names it, or the
// embedded pool key.
func poolObjectName(src inventory.Source, name string) string {
	if src.Kind() == "cluster" {
		return "ippool.ipam.netpool.io/" + name
	}
	return "pool/" + name
}

// knownNetwork fails, listing the network names there are, when no pool has network name network.
func knownNetwork(pools []inventory.Pool, network, where string) error {
	names := make([]string, 0, len(pools))
	for _, p := range pools {
		if p.Network == network {
			return nil
		}
		names = append(names, p.Network)
	}
	return unknownNetwork(network, where, names)
}

// unknownNetwork is the one wording of "no pool has this network name" for every command that
// selects pools by network: it lists the names there are, sorted and each once, so that a typo
// shows its neighbour, and names the unnamed network, which would otherwise print as nothing.
func unknownNetwork(network, where string, networks []string) error {
	names := slices.Clone(networks)
	slices.Sort(names)
	names = slices.Compact(names)
	for i, n := range names {
		if n == "" {
			names[i] = `"" (the unnamed network)`
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("no pool of network %q in the %s: it has no pools", network, where)
	}
	return fmt.Errorf("no pool of network %q in the %s: its networks are %s", network, where, joinFew(names))
}
