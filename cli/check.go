package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/netpool/netpool/allocator/boltstore"
)

// checkReport is the json and yaml schema of `netpoolctl check` (docs/cli-output.md).
type checkReport struct {
	docHeader
	// Store is "cluster", or the path of the embedded store that was checked.
	Store string `json:"store"`
	// Pools, Allocations and Slices count what was checked (reservations in a cluster, records
	// in a bbolt file; a bbolt file has no slices).
	Pools       int `json:"pools"`
	Allocations int `json:"allocations"`
	Slices      int `json:"slices"`
	// Whereabouts counts the live whereabouts allocations compared with netpool's reservations
	// (--whereabouts, or whereabouts' CRDs are installed); absent when none were.
	Whereabouts int `json:"whereabouts,omitempty"`
	// Findings are the inconsistencies; empty when the store is consistent.
	Findings []checkFinding `json:"findings"`
}

// checkFinding is one inconsistency.
type checkFinding struct {
	// Kind names the check that failed (docs/cli-output.md lists them).
	Kind string `json:"kind"`
	// Object is the object or bucket concerned, as kind/name ("ippool/blue",
	// "overlappingrangeipreservation/blue.10.0.0.5"; in a bbolt file "pool/blue/10.0.0.0/24" or
	// "scope/net:blue"); empty when the
	// finding concerns the whole store.
	Object string `json:"object,omitempty"`
	// Message says what is wrong, naming the addresses and objects involved.
	Message string `json:"message"`
}

func newCheck(opts *options) *cobra.Command {
	var network string
	var whereabouts bool
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check the allocations for consistency; exit non-zero on any finding",
		Long: `check reads every pool, reservation and slice and reports each inconsistency by kind,
then exits non-zero if it found any. It changes nothing.

In a cluster it checks that no address is held twice in one uniqueness scope (the pool
model's: the network with overlapping ranges on, else the pool) and that each reservation
is named as the lock of its address in that scope; that every reservation's pool exists and
can hand out its address; that every slice lies in its pool's range and belongs to an
existing Node; and that each pool's status.capacity, status.allocated and status.free are
what the controller's own counting gives for its spec and its reservations. The controller
writes a pool's status at most once a second, so a count checked during a burst of
allocations may lag; and the pools, reservations, slices and nodes are listed one after
another, not at one instant. On a cluster that is changing, check again before acting on a
finding. --network limits the check to the pools of one network name and their reservations
and slices.

Where whereabouts' CRDs are installed (or with --whereabouts), it also compares whereabouts'
records (IPPool allocations and OverlappingRangeIPReservations) with netpool's: an address a live
whereabouts allocation holds that netpool gives to another attachment is HeldTwice, one in a
netpool pool that netpool does not hold is WhereaboutsOnly (netpool may hand it out again; netpoolctl
migrate whereabouts --apply imports it). --whereabouts=false skips this.

With --db it checks an embedded store file, opened read-only and never created: that its page
graph is sound (every page bbolt would follow lies in the file and is reached once, so a
cycle or an overflow past the file is refused at once), bbolt's own consistency check, and
that netpool's indexes agree with the allocation records (the owners index, each pool's used
runs, each overlap scope's runs), that every record decodes and that every address lies in
its pool's subnet. It waits at most --request-timeout for a plugin that is writing; SIGTERM
or SIGINT ends it at once.

Examples:
  # Check the cluster
  netpoolctl check

  # Check the pools of network "storage" only, as JSON
  netpoolctl check --network storage -o json

  # Check a node's embedded store
  netpoolctl --db /var/lib/cni/netpool/netpool.db check`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := parseFormat(opts.output)
			if err != nil {
				return err
			}
			embedded, err := opts.embedded()
			if err != nil {
				return err
			}
			var report checkReport
			if embedded {
				if cmd.Flags().Changed("network") {
					return fmt.Errorf("--network selects pools in a cluster; an embedded store is checked whole")
				}
				if cmd.Flags().Changed("whereabouts") {
					return fmt.Errorf("--whereabouts compares a cluster's whereabouts records; an embedded store has none")
				}
				report, err = checkBolt(cmd.Context(), opts)
			} else {
				var c clusterChecker
				if c.client, err = opts.kubeClient(); err != nil {
					return err
				}
				c.network, c.oneNetwork = network, cmd.Flags().Changed("network")
				c.whereabouts = whereaboutsAuto
				if cmd.Flags().Changed("whereabouts") {
					c.whereabouts = map[bool]whereaboutsMode{true: whereaboutsOn, false: whereaboutsOff}[whereabouts]
				}
				report, err = c.run(cmd.Context())
			}
			if err != nil {
				return err
			}
			if len(report.Findings) == 0 && (f == formatTable || f == formatWide) {
				wb := ""
				if report.Whereabouts > 0 {
					wb = fmt.Sprintf(", whereabouts allocations: %d", report.Whereabouts)
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "No inconsistencies in %s (pools: %d, allocations: %d, slices: %d%s).\n",
					report.Store, report.Pools, report.Allocations, report.Slices, wb)
				return err
			}
			if err := emit(cmd.OutOrStdout(), f, findingTable(report.Findings), report); err != nil {
				return err
			}
			switch n := len(report.Findings); n {
			case 0:
			case 1:
				return fmt.Errorf("check found 1 inconsistency in %s", report.Store)
			default:
				return fmt.Errorf("check found %d inconsistencies in %s", n, report.Store)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&whereabouts, "whereabouts", false, "compare whereabouts' records with netpool's (default: when whereabouts' CRDs are installed)")
	cmd.Flags().StringVar(&network, "network", "", `check only the pools of this network name ("" is the unnamed network) and their reservations and slices`)
	return cmd
}

// checkBolt verifies the embedded store at --db; --request-timeout bounds the wait for a writer.
func checkBolt(ctx context.Context, opts *options) (checkReport, error) {
	if opts.timeout <= 0 {
		return checkReport{}, fmt.Errorf("--request-timeout must be positive, not %s", opts.timeout)
	}
	v, err := boltstore.Verify(ctx, opts.db, opts.timeout)
	if err != nil {
		return checkReport{}, err
	}
	report := checkReport{docHeader: docHeader{APIVersion: schemaVersion, Kind: "CheckReport", Source: "bbolt"}, Store: opts.db, Pools: v.Pools, Allocations: v.Allocations, Findings: []checkFinding{}}
	for _, f := range v.Findings {
		report.Findings = append(report.Findings, checkFinding{Kind: string(f.Kind), Object: f.Object, Message: f.Text})
	}
	return report, nil
}

func findingTable(findings []checkFinding) *table {
	t := &table{columns: []column{{header: "kind"}, {header: "object"}, {header: "message"}}}
	for _, f := range findings {
		t.add(f.Kind, f.Object, f.Message)
	}
	return t
}
