package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/netpool/netpool/cli/inventory"
)

// maxReportBytes bounds a leak report read by --from-report: a report of every address of a large
// cluster is a few MiB; anything past this is not one.
const maxReportBytes = 64 << 20

// readLeakReport reads and checks a LeakList document (json or yaml) from path, "-" for stdin.
func readLeakReport(cmd *cobra.Command, path string) (*leakReport, error) {
	var in io.Reader
	if path == "-" {
		in = cmd.InOrStdin()
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("--from-report: %w", err)
		}
		defer f.Close()
		in = f
	}
	data, err := io.ReadAll(io.LimitReader(in, maxReportBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--from-report %s: %w", path, err)
	}
	if len(data) > maxReportBytes {
		return nil, fmt.Errorf("--from-report %s: larger than %d MiB, which no leak report is", path, maxReportBytes>>20)
	}
	var r leakReport
	if err := yaml.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("--from-report %s: not a leak report (netpoolctl leaks -o json): %w", path, err)
	}
	if r.APIVersion != schemaVersion || r.Kind != "LeakList" {
		return nil, fmt.Errorf("--from-report %s: apiVersion %q, kind %q is not a leak report: want apiVersion %s, kind LeakList (netpoolctl leaks -o json)",
			path, r.APIVersion, r.Kind, schemaVersion)
	}
	for i, l := range r.Leaks {
		if l.Reservation == "" || l.Address == "" {
			return nil, fmt.Errorf("--from-report %s: leak %d names no reservation or address", path, i+1)
		}
	}
	return &r, nil
}

// runReleaseReport releases the addresses of a leak report that the GC policy still calls leaked.
func runReleaseReport(cmd *cobra.Command, opts *options, pr *printer, rf releaseFlags, args []string) error {
	switch {
	case len(args) > 0 || rf.pod != "" || rf.iface != "":
		return errors.New("--from-report names the addresses: give no IP, --pod or --interface with it")
	case rf.force:
		return errors.New("--from-report releases only what the GC policy still calls leaked: --force does not apply (release one address with --force)")
	case rf.report == "-" && !rf.yes:
		return errors.New("--from-report - reads the report on standard input, where the confirmation would be read too: add --yes")
	}
	embedded, err := opts.embedded()
	if err != nil {
		return err
	}
	if embedded {
		return errNoLivenessInBolt
	}
	report, err := readLeakReport(cmd, rf.report)
	if err != nil {
		return err
	}
	grace := rf.grace
	if !cmd.Flags().Changed("grace") {
		if grace, err = time.ParseDuration(report.Grace); err != nil || grace < 0 {
			return fmt.Errorf("--from-report %s: grace %q is not a duration (give --grace)", rf.report, report.Grace)
		}
	}
	src, err := opts.sourceWithGrace(grace)
	if err != nil {
		return err
	}
	defer src.Close()
	ctx := cmd.Context()
	all, err := src.Allocations(ctx, "")
	if err != nil {
		return err
	}
	byName := make(map[string]inventory.Allocation, len(all))
	for _, a := range all {
		byName[a.Reservation] = a
	}
	rel := newReleaser(src)
	var picked []inventory.Allocation
	for _, l := range report.Leaks {
		a, ok := byName[l.Reservation]
		reported := allocationView{Address: l.Address, Pool: l.Pool, Holder: l.Pod, ContainerID: l.ContainerID, Interface: l.Interface,
			Node: l.Node, PodUID: l.PodUID, Reservation: l.Reservation}
		switch {
		case !ok:
			rel.refuse(reported, resultGone, "released since the report")
			continue
		case (l.UID != "" && a.UID != l.UID) || a.Address.String() != l.Address || a.ContainerID != l.ContainerID || a.Interface != l.Interface:
			rel.refuse(viewOfAllocation(a), resultRefused, fmt.Sprintf("claimed anew since the report: now container %s interface %s (UID %s)", a.ContainerID, a.Interface, a.UID))
			continue
		}
		alive, why, err := src.Alive(ctx, a)
		if err != nil {
			return fmt.Errorf("failed to judge the owner of %s: %w; nothing released", a.Address, err)
		}
		if alive {
			rel.refuse(viewOfAllocation(a), resultRefused, "live again since the report: "+why)
			continue
		}
		picked = append(picked, a)
	}
	if len(picked) > 0 && !rf.yes {
		if err := confirmRelease(cmd.InOrStdin(), cmd.ErrOrStderr(), picked); err != nil {
			return err
		}
	}
	var failure error
	for _, a := range picked {
		if failure = rel.release(ctx, a); failure != nil {
			break
		}
	}
	if err := pr.print(cmd.OutOrStdout(), rel.output()); err != nil {
		return err
	}
	d := rel.doc
	gone := len(d.Results) - len(d.Released) - len(d.Refused) - len(d.Unchanged)
	fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d leak(s): released %d, refused %d, already released %d, claimed anew meanwhile %d\n",
		rf.report, len(report.Leaks), len(d.Released), len(d.Refused), gone, len(d.Unchanged))
	switch {
	case failure != nil:
		return fmt.Errorf("released %d of %d, then: %w", len(d.Released), len(picked), failure)
	case len(d.Refused)+len(d.Unchanged) > 0:
		return fmt.Errorf("%d of the report's %d leak(s) were left alone", len(d.Refused)+len(d.Unchanged), len(report.Leaks))
	}
	return nil
}
