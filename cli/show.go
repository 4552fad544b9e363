package cli

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/netpool/netpool/cli/inventory"
)

// poolDetail is the document of show.
type poolDetail struct {
	docHeader
	Pool        poolView         `json:"pool"`
	Allocations []allocationView `json:"allocations"`
	// Slices are the pool's node slices, with --slices only.
	Slices []sliceView `json:"slices,omitempty"`
}

func newShow(opts *options) *cobra.Command {
	var slices bool
	cmd := &cobra.Command{
		Use:   "show POOL",
		Short: "Show a pool's allocations, and with --slices its node slices",
		Long: `show lists the allocations of one pool (an IPPool's name, or with --db an embedded pool key such
as tenant-a/10.1.0.0/24, as pools prints it): each address with the pod holding it, its
interface, node and age; -o wide adds the pod UID, the CNI container ID and the CNI network.
--slices lists, after them, the pool's node slices (IPPoolSlices: the block each node allocates
from, and how many addresses it holds); an embedded store has none. -o json and -o yaml print
the PoolAllocations document of docs/cli-output.md.

    $ netpoolctl show ctlview-a --slices
    ADDRESS     POD              INTERFACE   NODE     AGE
    10.78.0.2   ctlview/web-0    net1        node-a   10h
    10.78.0.5   ctlview/gone-0   net1        node-b   10h

    SLICE         RANGE          NODE     USED   AGE
    ctlview-a.0   10.78.0.0/30   node-a   1      10h
    ctlview-a.1   10.78.0.4/30   node-b   1      10h

    $ netpoolctl --db /var/lib/cni/netpool/netpool.db show tenant-a/10.77.0.0/28 -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := parseFormat(opts.output)
			if err != nil {
				return err
			}
			src, err := opts.source()
			if err != nil {
				return err
			}
			defer src.Close()
			ctx := cmd.Context()
			pool, err := findPool(cmd, src, args[0])
			if err != nil {
				return err
			}
			as, err := src.Allocations(ctx, pool.Name)
			if err != nil {
				return err
			}
			var ss []inventory.Slice
			if slices {
				if ss, err = src.Slices(ctx, pool.Name); err != nil {
					return fmt.Errorf("--slices: %w", err)
				}
			}
			now := opts.now()
			doc := poolDetail{docHeader: newDocHeader("PoolAllocations", src), Pool: viewOfPool(pool), Allocations: []allocationView{}}
			t := &table{columns: []column{
				{header: "address"}, {header: "pod"}, {header: "interface"}, {header: "node"},
				{header: "pod uid", wide: true}, {header: "container", wide: true}, {header: "network", wide: true}, {header: "age"},
			}}
			for _, a := range as {
				doc.Allocations = append(doc.Allocations, viewOfAllocation(a))
				t.add(a.Address.String(), a.Pod(), a.Interface, a.Node, a.PodUID, a.ContainerID, a.Network, age(now, a.Created))
			}
			st := &table{columns: []column{{header: "slice"}, {header: "range"}, {header: "node"}, {header: "used"}, {header: "age"}}}
			for _, s := range ss {
				doc.Slices = append(doc.Slices, viewOfSlice(s))
				st.add(s.Name, s.Range.String(), s.Node, fmt.Sprint(s.Used), age(now, s.Created))
			}
			var b bytes.Buffer
			if err := emit(&b, f, t, doc); err != nil {
				return err
			}
			if slices && (f == formatTable || f == formatWide) {
				b.WriteString("\n")
				if err := emit(&b, f, st, nil); err != nil {
					return err
				}
			}
			_, err = cmd.OutOrStdout().Write(b.Bytes())
			return err
		},
	}
	cmd.Flags().BoolVar(&slices, "slices", false, "also list the pool's node slices (IPPoolSlices)")
	return cmd
}

// findPool returns the pool named name, or an error naming the pools there are.
func findPool(cmd *cobra.Command, src inventory.Source, name string) (inventory.Pool, error) {
	pools, err := src.Pools(cmd.Context())
	if err != nil {
		return inventory.Pool{}, err
	}
	var names []string
	for _, p := range pools {
		if p.Name == name {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return inventory.Pool{}, fmt.Errorf("%w %q in the %s: %s", inventory.ErrUnknownPool, name, src.Kind(), poolNames(names))
}

// poolNames lists a few pool names for an error.
func poolNames(names []string) string {
	const most = 8
	switch {
	case len(names) == 0:
		return "it has no pools"
	case len(names) > most:
		return fmt.Sprintf("its pools include %s and %d more (netpoolctl pools lists them)", strings.Join(names[:most], ", "), len(names)-most)
	}
	return "its pools are " + strings.Join(names, ", ")
}
