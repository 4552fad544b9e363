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
	var extraConfig, extraLog []string
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

Every run then verifies: NADs already switched to netpool are read too, and every address a live
whereabouts allocation (IPPool or OverlappingRangeIPReservation) holds in a netpool pool must be
netpool's reservation of the same attachment. An address netpool gives to another attachment
(HeldTwice) makes the command exit non-zero; one netpool does not hold (WhereaboutsOnly) is
imported by --apply.

--switch-nads switches with no window: it locks whereabouts' IPPools of the NADs (whereabouts then
fails every ADD from them, and allocates nothing more), imports again, and switches each NAD's
whereabouts sections to netpool, changing no other byte of its config. The lock stays.
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
			o.Agents = migrate.DefaultAgentDirs()
			o.Agents.Config = append(o.Agents.Config, extraConfig...)
			o.Agents.Log = append(o.Agents.Log, extraLog...)
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
			if report.Failed() {
				return fmt.Errorf("%d addresses held by whereabouts and netpool for different attachments", report.Summary.HeldTwice)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.Apply, "apply", false, "write the pools and reservations (default: a dry run that changes nothing)")
	cmd.Flags().BoolVar(&o.SwitchNADs, "switch-nads", false, "lock whereabouts' pools of the NADs, import again and switch each NAD to netpool: the switch with no window (implies --apply)")
	cmd.Flags().StringVar(&o.WhereaboutsNamespace, "whereabouts-namespace", "kube-system", "namespace of whereabouts' kubeconfig context, where --switch-nads creates the locked pool of a range whereabouts has no pool for yet")
	cmd.Flags().StringSliceVar(&extraConfig, "agent-extra-config-dir", nil, "a directory the node agents serve with --extra-config-dir, so a configuration_path there is not flagged (repeatable)")
	cmd.Flags().StringSliceVar(&extraLog, "agent-extra-log-dir", nil, "a directory the node agents serve with --extra-log-dir, so a log_file there is not flagged (repeatable)")
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
		{header: "locked", wide: true}, {header: "action"}, {header: "reason"}}}
	for _, p := range r.Pools {
		pools.add(p.Name, p.Range, p.NetworkName, p.Whereabouts, strconv.FormatBool(p.Locked), string(p.Action), p.Reason)
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
	if len(r.Discrepancies) > 0 {
		verify := &table{columns: []column{{header: "verify"}, {header: "address"}, {header: "pool"}, {header: "whereabouts_pod"},
			{header: "netpool_holder"}, {header: "whereabouts", wide: true}, {header: "reservation", wide: true}, {header: "message", wide: true}}}
		for _, d := range r.Discrepancies {
			verify.add(d.Kind, d.Address, d.Pool, d.Pod+" "+d.IfName, d.Holder, d.Whereabouts, d.Reservation, d.Message)
		}
		tables = append(tables, verify)
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
	if s.HeldTwice+s.WhereaboutsOnly > 0 {
		fmt.Fprintf(&b, "; verify: %d held twice, %d whereabouts-only", s.HeldTwice, s.WhereaboutsOnly)
	}
	switched := 0
	for _, n := range r.NADs {
		if n.SwitchedNow {
			switched++
		}
	}
	switch {
	case r.Failed():
	case switched > 0:
		fmt.Fprintf(&b, "; switched %d NAD sections to netpool, whereabouts' pools locked", switched)
	case r.Applied || s.Create == 0:
		b.WriteString("; no address moves: switch each NAD's ipam type to netpool (CHANGE)")
	default:
		b.WriteString("; run again with --apply to write")
	}
	return b.String()
}
