package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/netpool/netpool/cli/inventory"
	"github.com/netpool/netpool/internal/gcpolicy"
)

// releaseDoc is the document of release.
type releaseDoc struct {
	docHeader
	// Released are the allocations this call released.
	Released []allocationView `json:"released"`
	// Unchanged are those it found released or claimed anew meanwhile, and left alone.
	Unchanged []allocationView `json:"unchanged,omitempty"`
	// Refused are those a release from a report left alone, each with the rule that kept it.
	Refused []refusedView `json:"refused,omitempty"`
	// Results are every address's outcome, in the order of the table.
	Results []releaseResult `json:"results"`
}

// refusedView is an allocation a release refused, and why.
type refusedView struct {
	allocationView
	Reason string `json:"reason"`
}

// releaseResult is one address's outcome: Released, Unchanged (released or claimed anew
// meanwhile), Refused (with the rule) or Gone (released since the report).
type releaseResult struct {
	Address string `json:"address"`
	Pool    string `json:"pool"`
	Result  string `json:"result"`
	Detail  string `json:"detail,omitempty"`
}

const (
	resultReleased  = "Released"
	resultUnchanged = "Unchanged"
	resultRefused   = "Refused"
	resultGone      = "Gone"
)

type releaseFlags struct {
	pod, iface, pool, report string
	grace                    time.Duration
	force, yes               bool
}

func newRelease(opts *options) *cobra.Command {
	var rf releaseFlags
	cmd := &cobra.Command{
		Use:   "release IP | --pod [NAMESPACE/]NAME [--interface NAME] | --from-report FILE",
		Short: "Release an address, a pod's addresses, or a leak report's addresses, whose owner is gone",
		Long: `release frees an address (or with --pod every address of a pod, narrowed to one interface by
--interface; the pod is NAMESPACE/NAME, or NAME with -n), or every address of a leak report that
netpoolctl leaks -o json wrote (--from-report), and prints exactly what it released.

It refuses while the owner is alive, unless --force, and says by which rule. In a cluster
"alive" is the controller's own leak policy (the code of its GC): a reservation is released only
if the policy gives a reason (its pod is gone, was replaced, has finished, or runs without listing
the address); one younger than --grace (default the controller's GC grace, as leaks), one naming
no pod, and one whose pod runs and lists it are alive. An address of an IPAMClaim or a sticky
StatefulSet is alive while its owner exists, and after that while a pod is still bound to it (a
StatefulSet scaled down whose pod still runs). An embedded store (--db) has no pod API to ask, so
every owner there counts as alive: release with --db always needs --force, after checking that the
container is gone.

--from-report judges each address of the report again, now, by the same policy and the report's
grace (or --grace): an address that became live again since the report, or that was released and
claimed anew (another UID), is refused and named, and the others are released; a summary follows
on standard error. --force does not apply to a report.

It asks for confirmation on its standard input unless --yes; any answer but y or yes releases
nothing. In a cluster it releases through the controller's conditional delete, on the
reservation's UID, so an address claimed anew by an ADD meanwhile is never touched; with --db it
releases in one transaction of the store, only if the same attachment still holds the address
since the same time. It exits non-zero when it released nothing, or less than it was asked to.
-o json and -o yaml print the Release document of docs/cli-output.md.

    $ netpoolctl release 10.78.0.5
    About to release 1 address(es):
      10.78.0.5 in pool ctlview-a, held by pod ctlview/gone-0, container ctr-gone-0-net1 interface net1 on node node-b
    Release? [y/N] y
    ADDRESS     POOL        HOLDER           INTERFACE   NODE     RESULT
    10.78.0.5   ctlview-a   ctlview/gone-0   net1        node-b   Released

    $ netpoolctl leaks -o json > leaks.json; netpoolctl release --from-report leaks.json --yes
    $ netpoolctl -n shop release --pod web-0 --interface net1 --yes
    $ netpoolctl --db /var/lib/cni/netpool/netpool.db release 10.77.0.2 --force`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return fmt.Errorf("release takes at most one IP, not %d arguments", len(args))
			}
			return nil
		},
		ValidArgsFunction: completeArgs(opts, 1, completeAddresses),
		RunE: func(cmd *cobra.Command, args []string) error {
			pr, err := opts.print.printer()
			if err != nil {
				return err
			}
			if rf.grace < 0 {
				return fmt.Errorf("--grace must not be negative, not %s", rf.grace)
			}
			if rf.report != "" {
				return runReleaseReport(cmd, opts, pr, rf, args)
			}
			match, err := rf.matcher(args, opts.namespace())
			if err != nil {
				return err
			}
			src, err := opts.sourceWithGrace(rf.grace)
			if err != nil {
				return err
			}
			defer src.Close()
			return runRelease(cmd, src, pr, rf, match, opts.namespace())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&rf.pod, "pod", "", "release the addresses of this pod, NAMESPACE/NAME (or NAME with -n)")
	fl.StringVar(&rf.iface, "interface", "", "with --pod, only the address of this interface (such as net1)")
	fl.StringVar(&rf.pool, "pool", "", "only the allocation of this pool (when pools of different networks hold the same IP)")
	fl.StringVar(&rf.report, "from-report", "", "release the addresses of this leak report (netpoolctl leaks -o json), each judged again now")
	fl.DurationVar(&rf.grace, "grace", gcpolicy.DefaultGrace, "a reservation younger than this is alive (the controller's --gc-grace; leaks --grace)")
	fl.BoolVar(&rf.force, "force", false, "release even while the owner is alive")
	fl.BoolVarP(&rf.yes, "yes", "y", false, "do not ask for confirmation")
	registerCompletion(cmd, opts, "pod", completePods)
	registerCompletion(cmd, opts, "pool", completePools)
	return cmd
}

// matcher checks the arguments and returns what selects the allocations to release.
func (rf releaseFlags) matcher(args []string, namespace string) (func(inventory.Allocation) bool, error) {
	switch {
	case len(args) == 1 && rf.pod != "":
		return nil, fmt.Errorf("give an IP or --pod, not both")
	case len(args) == 0 && rf.pod == "":
		return nil, fmt.Errorf("give the IP to release, --pod NAMESPACE/NAME or --from-report FILE")
	case rf.iface != "" && rf.pod == "":
		return nil, fmt.Errorf("--interface narrows --pod; an IP names one address already")
	}
	inPool := func(a inventory.Allocation) bool { return rf.pool == "" || a.Pool == rf.pool }
	if len(args) == 1 {
		addr, err := parseAddrArg(args[0])
		if err != nil {
			return nil, err
		}
		return func(a inventory.Allocation) bool { return a.Address == addr && inPool(a) }, nil
	}
	ns, name, err := podArg(rf.pod, namespace, "--pod")
	if err != nil {
		return nil, err
	}
	return func(a inventory.Allocation) bool {
		return a.Namespace == ns && a.PodName == name && (rf.iface == "" || a.Interface == rf.iface) && inPool(a)
	}, nil
}

// podArg reads a pod argument, NAMESPACE/NAME, or NAME in namespace (-n).
func podArg(s, namespace, what string) (string, string, error) {
	if !strings.Contains(s, "/") {
		if namespace == "" || s == "" {
			return "", "", fmt.Errorf("%s %q: want NAMESPACE/NAME, or NAME with -n NAMESPACE", what, s)
		}
		return namespace, s, nil
	}
	ns, name, ok := gcpolicy.SplitPodRef(s)
	if !ok || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%s %q: want NAMESPACE/NAME", what, s)
	}
	if namespace != "" && ns != namespace {
		return "", "", fmt.Errorf("%s %q is in namespace %s, but -n says %s", what, s, ns, namespace)
	}
	return ns, name, nil
}

func (rf releaseFlags) what(args []string) string {
	switch {
	case len(args) == 1:
		return args[0]
	case rf.iface != "":
		return "pod " + rf.pod + " interface " + rf.iface
	}
	return "pod " + rf.pod
}

func runRelease(cmd *cobra.Command, src inventory.Source, pr *printer, rf releaseFlags, match func(inventory.Allocation) bool, namespace string) error {
	ctx := cmd.Context()
	all, err := src.Allocations(ctx, "")
	if err != nil {
		return err
	}
	var picked []inventory.Allocation
	for _, a := range all {
		if match(a) {
			picked = append(picked, a)
		}
	}
	what := rf.what(cmd.Flags().Args())
	if rf.pool != "" {
		what += " in pool " + rf.pool
		if len(picked) == 0 {
			if _, err := findPool(ctx, src, rf.pool); err != nil {
				return fmt.Errorf("--pool: %w; nothing released", err)
			}
		}
	}
	switch {
	case len(picked) == 0:
		return fmt.Errorf("no allocation of %s in the %s: nothing released", what, src.Kind())
	case rf.pod == "" && len(picked) > 1:
		var pools []string
		for _, a := range picked {
			pools = append(pools, a.Pool)
		}
		return fmt.Errorf("%s is held in %d pools (%s): name one with --pool; nothing released", what, len(picked), strings.Join(pools, ", "))
	}
	var alive []string
	for _, a := range picked {
		ok, why, err := src.Alive(ctx, a)
		if err != nil {
			return fmt.Errorf("failed to judge the owner of %s: %w; nothing released", a.Address, err)
		}
		if ok {
			alive = append(alive, fmt.Sprintf("%s (pool %s, %s): %s", a.Address, a.Pool, releaseHolder(a), why))
		}
	}
	if len(alive) > 0 && !rf.force {
		return fmt.Errorf("refusing to release, by the GC policy's rules; nothing released (--force releases anyway):\n  %s", strings.Join(alive, "\n  "))
	}
	if !rf.yes {
		if err := confirmRelease(cmd.InOrStdin(), cmd.ErrOrStderr(), picked); err != nil {
			return err
		}
	}
	rel := newReleaser(src)
	var failure error
	for _, a := range picked {
		if failure = rel.release(ctx, a); failure != nil {
			break
		}
	}
	if err := pr.print(cmd.OutOrStdout(), rel.output()); err != nil {
		return err
	}
	switch {
	case failure != nil:
		return fmt.Errorf("released %d of %d, then: %w", len(rel.doc.Released), len(picked), failure)
	case len(rel.doc.Unchanged) > 0:
		return fmt.Errorf("%d of %d were no longer the claim that was read, and were left alone", len(rel.doc.Unchanged), len(picked))
	}
	return nil
}

// releaser releases allocations one by one and keeps the document and table of what it did.
type releaser struct {
	src inventory.Source
	doc releaseDoc
	t   *table
}

func newReleaser(src inventory.Source) *releaser {
	return &releaser{src: src, doc: releaseDoc{docHeader: newDocHeader("Release", src), Released: []allocationView{}, Results: []releaseResult{}},
		t: &table{columns: releaseColumns}}
}

// releaseColumns are release's table (docs/cli-output.md lists them; a test compares).
var releaseColumns = []column{
	{header: "address"}, {header: "pool"}, {header: "holder"}, {header: "interface"}, {header: "node"},
	{header: "container", wide: true}, {header: "pod uid", wide: true}, {header: "reservation", wide: true}, {header: "result"},
}

// release releases a through the source's conditional release.
func (r *releaser) release(ctx context.Context, a inventory.Allocation) error {
	released, err := r.src.Release(ctx, a)
	if err != nil {
		return err
	}
	v := viewOfAllocation(a)
	if released {
		r.doc.Released = append(r.doc.Released, v)
		r.add(v, resultReleased, "")
	} else {
		r.doc.Unchanged = append(r.doc.Unchanged, v)
		r.add(v, resultUnchanged, "released or claimed anew meanwhile")
	}
	return nil
}

// refuse records that a was left alone, and why.
func (r *releaser) refuse(a allocationView, result, why string) {
	if result == resultRefused {
		r.doc.Refused = append(r.doc.Refused, refusedView{allocationView: a, Reason: why})
	}
	r.add(a, result, why)
}

func (r *releaser) add(v allocationView, result, detail string) {
	r.doc.Results = append(r.doc.Results, releaseResult{Address: v.Address, Pool: v.Pool, Result: result, Detail: detail})
	text := result
	if detail != "" {
		text += " (" + detail + ")"
	}
	r.t.addNamed(allocationObjectName(r.src, v), v.Address, v.Pool, v.Holder, v.Interface, v.Node, v.ContainerID, v.PodUID, v.Reservation, text)
}

func (r *releaser) output() output { return output{doc: &r.doc, items: "results", table: r.t} }

func releaseHolder(a inventory.Allocation) string {
	s := "container " + a.ContainerID + " interface " + a.Interface
	if pod := a.Pod(); pod != "" {
		s = "pod " + pod + ", " + s
	}
	if a.Node != "" {
		s += " on node " + a.Node
	}
	return s
}

// confirmRelease asks on errOut and reads one line of in: only y or yes goes on.
func confirmRelease(in io.Reader, errOut io.Writer, picked []inventory.Allocation) error {
	fmt.Fprintf(errOut, "About to release %d address(es):\n", len(picked))
	for _, a := range picked {
		fmt.Fprintf(errOut, "  %s in pool %s, held by %s\n", a.Address, a.Pool, releaseHolder(a))
	}
	fmt.Fprint(errOut, "Release? [y/N] ")
	line, err := bufio.NewReader(io.LimitReader(in, 1024)).ReadString('\n')
	if err != nil && line == "" {
		return fmt.Errorf("no answer on standard input (use --yes to skip the question): nothing released")
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errors.New("not confirmed: nothing released")
}
