package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/netpool/netpool/cli/inventory"
)

// poolDetail is the document of show.
type poolDetail struct {
	docHeader
	Pool        poolView         `json:"pool"`
	Allocations []allocationView `json:"allocations"`
	// Cooling are the pool's addresses released under its reuse cool-down that still cool.
	Cooling []coolingView `json:"cooling,omitempty"`
	// Slices are the pool's node slices, with --slices only.
	Slices []sliceView `json:"slices,omitempty"`
}

// coolingView is an address that cools after its release.
type coolingView struct {
	Address    string     `json:"address"`
	ReleasedAt *time.Time `json:"releasedAt"`
	// Until is when the cool-down ends; absent where the source does not know it.
	Until *time.Time `json:"until,omitempty"`
}

const (
	stateHeld    = "Held"
	stateCooling = "Cooling"
)

// coolingText is a cooling address's state for a table: "Cooling (released 3s ago, until ...)".
func coolingText(now time.Time, r inventory.Released) string {
	until := "for the pool's reuseCooldown, which the file does not record"
	if !r.Until.IsZero() {
		until = "until " + r.Until.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%s (released %s ago, %s)", stateCooling, age(now, r.At), until)
}

func newShow(opts *options) *cobra.Command {
	var (
		slices   bool
		watch    bool
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "show POOL",
		Short: "Show a pool's allocations, and with --slices its node slices",
		Long: `show lists the allocations of one pool (an IPPool's name, or with --db an embedded pool key such
as tenant-a/10.1.0.0/24, as pools prints it): each address with its holder (the pod, else on a
bare host the container ID shortened as crictl prints it), its interface, node, persistent owner
(an IPAMClaim, or a sticky StatefulSet's ordinal) and age, and after them the addresses that cool
after their release (STATE Cooling). -o wide adds the pod UID, the CNI container ID, the CNI
network name and the reservation. -n narrows the list to the pods of one namespace.
--slices lists, after them, the pool's node slices (IPPoolSlices: the block each node allocates
from, and how many addresses it holds); an embedded store has none. --watch prints an address's
row again whenever it changes (in a cluster from watch events of the pool's reservations, which
the API server selects on spec.pool). -o json and -o yaml print the PoolAllocations document of
docs/cli-output.md.

    $ netpoolctl show ctlview-a --slices
    ADDRESS     STATE   HOLDER           INTERFACE   NODE     OWNER    AGE
    10.78.0.2   Held    ctlview/web-0    net1        node-a   <none>   10h
    10.78.0.5   Held    ctlview/gone-0   net1        node-b   <none>   10h

    SLICE         RANGE          NODE     USED   AGE
    ctlview-a.0   10.78.0.0/30   node-a   1      10h
    ctlview-a.1   10.78.0.4/30   node-b   1      10h

    $ netpoolctl --db /var/lib/cni/netpool/netpool.db show tenant-a/10.77.0.0/28 -o yaml`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("show takes one POOL, not %d arguments (netpoolctl pools lists the pools)", len(args))
			}
			return nil
		},
		ValidArgsFunction: completeArgs(opts, 1, completePools),
		RunE: func(cmd *cobra.Command, args []string) error {
			pr, err := opts.print.printer()
			if err != nil {
				return err
			}
			render := func(ctx context.Context, src inventory.Source) (output, error) {
				return showOutput(ctx, opts, src, args[0], slices)
			}
			if watch {
				if slices && pr.tabular() {
					return errors.New("--watch prints the allocations' rows; it cannot follow --slices' second table too")
				}
				return runWatch(cmd, opts, pr, interval, watchScope{pool: args[0], slices: slices}, render)
			}
			src, err := opts.source()
			if err != nil {
				return err
			}
			defer src.Close()
			out, err := render(cmd.Context(), src)
			if err != nil {
				return err
			}
			var b bytes.Buffer
			if err := pr.print(&b, out); err != nil {
				return err
			}
			if doc := out.doc.(*poolDetail); slices && pr.tabular() {
				b.WriteString("\n")
				if err := pr.print(&b, output{table: sliceTable(doc, opts.now())}); err != nil {
					return err
				}
			}
			_, err = cmd.OutOrStdout().Write(b.Bytes())
			return err
		},
	}
	cmd.Flags().BoolVar(&slices, "slices", false, "also list the pool's node slices (IPPoolSlices)")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after listing, print an address's row again whenever it changes")
	cmd.Flags().DurationVar(&interval, "watch-interval", 2*time.Second, "with --watch and --db, how often to read the file for a change")
	return cmd
}

// allocationColumns are the columns of an allocation's row in show and pod.
var allocationColumns = []column{
	{header: "address"}, {header: "state"}, {header: "holder"}, {header: "interface"}, {header: "node"}, {header: "owner"},
	{header: "pod uid", wide: true}, {header: "container", wide: true}, {header: "cni-network", wide: true},
	{header: "reservation", wide: true}, {header: "age"},
}

// allocationRow adds a's row to t.
func allocationRow(t *table, src inventory.Source, now time.Time, a allocationView) {
	since := ""
	if a.Created != nil {
		since = age(now, *a.Created)
	}
	t.addNamed(allocationObjectName(src, a), a.Address, stateHeld, a.Holder, a.Interface, a.Node, ownerText(a.Owner),
		a.PodUID, a.ContainerID, a.CNINetwork, a.Reservation, since)
}

// allocationObjectName is what -o name prints for an allocation: its reservation as kubectl names
// it, or the embedded pool key and address.
func allocationObjectName(src inventory.Source, a allocationView) string {
	if src.Kind() == "cluster" && a.Reservation != "" {
		return "overlappingrangeipreservation.ipam.netpool.io/" + a.Reservation
	}
	return "allocation/" + a.Pool + "/" + a.Address
}

func showOutput(ctx context.Context, opts *options, src inventory.Source, name string, withSlices bool) (output, error) {
	pool, err := findPool(ctx, src, name)
	if err != nil {
		return output{}, err
	}
	as, err := src.Allocations(ctx, pool.Name)
	if err != nil {
		return output{}, err
	}
	cooling, err := src.Released(ctx, pool.Name)
	if err != nil {
		return output{}, fmt.Errorf("reading the pool's cooling addresses: %w", err)
	}
	var ss []inventory.Slice
	if withSlices {
		if ss, err = src.Slices(ctx, pool.Name); err != nil {
			return output{}, fmt.Errorf("--slices: %w", err)
		}
	}
	now := opts.now()
	ns := opts.namespace()
	doc := &poolDetail{docHeader: newDocHeader("PoolAllocations", src), Pool: viewOfPool(pool), Allocations: []allocationView{}}
	t := &table{columns: allocationColumns}
	for _, a := range as {
		if ns != "" && a.Namespace != ns {
			continue
		}
		v := viewOfAllocation(a)
		doc.Allocations = append(doc.Allocations, v)
		allocationRow(t, src, now, v)
	}
	for _, r := range cooling {
		doc.Cooling = append(doc.Cooling, coolingView{Address: r.Address.String(), ReleasedAt: docTime(r.At), Until: docTime(r.Until)})
		if ns == "" {
			t.addNamed("cooling/"+pool.Name+"/"+r.Address.String(), r.Address.String(), coolingText(now, r))
		}
	}
	for _, s := range ss {
		doc.Slices = append(doc.Slices, viewOfSlice(s))
	}
	return output{doc: doc, items: "allocations", table: t}, nil
}

// sliceColumns are show --slices's second table.
var sliceColumns = []column{{header: "slice"}, {header: "range"}, {header: "node"}, {header: "used"}, {header: "age"}}

func sliceTable(doc *poolDetail, now time.Time) *table {
	st := &table{columns: sliceColumns}
	for _, s := range doc.Slices {
		created := ""
		if s.Created != nil {
			created = age(now, *s.Created)
		}
		st.addNamed("ippoolslice.ipam.netpool.io/"+s.Name, s.Name, s.Range, s.Node, fmt.Sprint(s.Used), created)
	}
	return st
}

// findPool returns the pool named name, or an error naming the pools there are.
func findPool(ctx context.Context, src inventory.Source, name string) (inventory.Pool, error) {
	pools, err := src.Pools(ctx)
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
	if len(names) == 0 {
		return "it has no pools"
	}
	return "its pools are " + joinFew(names)
}

// joinFew joins a few names for an error, saying how many more there are.
func joinFew(names []string) string {
	const most = 8
	if len(names) > most {
		return fmt.Sprintf("%s and %d more (netpoolctl pools lists them)", strings.Join(names[:most], ", "), len(names)-most)
	}
	return strings.Join(names, ", ")
}
