package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/netpool/netpool/cli/migrate"
)

func newMigrate(opts *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Import another IPAM's allocations into netpool",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newMigrateWhereabouts(opts))
	return cmd
}

func newMigrateWhereabouts(opts *options) *cobra.Command {
	var o migrate.Options
	cmd := &cobra.Command{
		Use:   "whereabouts",
		Short: "Import a running whereabouts' allocations into netpool's pools and reservations",
		Long: `whereabouts reads every NetworkAttachmentDefinition whose config has an IPAM section of
"type": "whereabouts", whereabouts' IPPools (spec.allocations) and OverlappingRangeIPReservations,
and makes each allocation a netpool reservation of the pool the NAD's range derives, recorded for
the pod's node so that node's agent releases it on DEL. It is a dry run unless --apply is given.
Nothing that exists is changed: an address netpool already gives to another attachment is a
conflict, and any conflict or unreadable record makes --apply write nothing. A second run changes
nothing. The report says, per NAD, the one edit that switches it to netpool; no address moves.
See docs/migrate-from-whereabouts.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.db != "" {
				return errors.New("--db: whereabouts keeps its allocations in a cluster, so migrate works on a cluster only")
			}
			f, err := parseFormat(opts.output)
			if err != nil {
				return err
			}
			c, err := opts.kubeClient()
			if err != nil {
				return err
			}
			report, err := migrate.Run(context.Background(), c, o)
			if report != nil {
				if perr := printMigration(cmd.OutOrStdout(), f, report); perr != nil {
					return perr
				}
				fmt.Fprintln(cmd.ErrOrStderr(), migrationSummary(report, o.Apply))
			}
			if err != nil {
				return err
			}
			if report.Blocked() {
				return fmt.Errorf("%d conflicts and %d invalid entries: nothing was written", report.Summary.Conflicts, report.Summary.Invalid)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.Apply, "apply", false, "write the pools and reservations (default: a dry run that changes nothing)")
	cmd.Flags().StringVarP(&o.Namespace, "namespace", "n", "", "migrate the NADs of this namespace only (default: every namespace)")
	return cmd
}

func printMigration(w io.Writer, f format, r *migrate.Report) error {
	if f == formatJSON || f == formatYAML {
		return emit(w, f, nil, r)
	}
	nads := &table{columns: []column{{header: "nad"}, {header: "section"}, {header: "change"}, {header: "pools"}, {header: "kept"},
		{header: "network", wide: true}, {header: "network_name", wide: true}, {header: "note", wide: true}, {header: "error"}}}
	for _, n := range r.NADs {
		nads.add(n.Namespace+"/"+n.Name, n.Path, n.Change, strings.Join(n.Pools, ","), strconv.Itoa(n.Kept),
			n.Network, n.NetworkName, n.Note, n.Error)
	}
	pools := &table{columns: []column{{header: "pool"}, {header: "range"}, {header: "network_name"}, {header: "whereabouts"},
		{header: "action"}, {header: "reason"}}}
	for _, p := range r.Pools {
		pools.add(p.Name, p.Range, p.NetworkName, p.Whereabouts, string(p.Action), p.Reason)
	}
	allocs := &table{columns: []column{{header: "address"}, {header: "pool"}, {header: "pod"}, {header: "node"},
		{header: "container", wide: true}, {header: "interface"}, {header: "pod_uid", wide: true}, {header: "reservation", wide: true},
		{header: "whereabouts", wide: true}, {header: "action"}, {header: "reason"}}}
	for _, a := range r.Allocations {
		allocs.add(a.Address, a.Pool, a.Pod, a.Node, a.ContainerID, a.IfName, a.PodUID, a.Reservation, a.Whereabouts, string(a.Action), a.Reason)
	}
	tables := []*table{nads, pools, allocs}
	if len(r.Findings) > 0 {
		findings := &table{columns: []column{{header: "whereabouts_object"}, {header: "action"}, {header: "reason"}}}
		for _, fd := range r.Findings {
			findings.add(fd.Object, string(fd.Action), fd.Reason)
		}
		tables = append(tables, findings)
	}
	for i, t := range tables {
		if i > 0 {
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
		}
		if err := t.write(w, f == formatWide); err != nil {
			return err
		}
	}
	return nil
}

func migrationSummary(r *migrate.Report, apply bool) string {
	s := r.Summary
	var b strings.Builder
	switch {
	case r.Applied:
		fmt.Fprintf(&b, "applied: %d created, %d unchanged", s.Created, s.Unchanged)
	case apply:
		fmt.Fprintf(&b, "not applied: %d to create, %d unchanged", s.Create, s.Unchanged)
	default:
		fmt.Fprintf(&b, "dry run: %d to create, %d unchanged", s.Create, s.Unchanged)
	}
	fmt.Fprintf(&b, ", %d conflicts, %d skipped, %d invalid", s.Conflicts, s.Skipped, s.Invalid)
	switch {
	case r.Blocked():
	case r.Applied || s.Create == 0:
		b.WriteString("; no address moves: switch each NAD's ipam type to netpool (CHANGE)")
	default:
		b.WriteString("; run again with --apply to write")
	}
	return b.String()
}
