package cli

import (
	"bufio"
	"fmt"
	"io"
	"strings"

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
}

type releaseFlags struct {
	pod, iface, pool string
	force, yes       bool
}

func newRelease(opts *options) *cobra.Command {
	var rf releaseFlags
	cmd := &cobra.Command{
		Use:   "release IP | --pod NAMESPACE/NAME [--interface NAME]",
		Short: "Release an address, or a pod's addresses, whose owner is gone",
		Long: `release frees an address (or with --pod every address of a pod, narrowed to one interface by
--interface) and prints exactly what it released.

It refuses while the owner is alive, unless --force. In a cluster "alive" is the controller's own
leak policy (the code of its GC): a reservation is released only if the policy gives a reason
(its pod is gone, was replaced, has finished, or runs without listing the address); one younger
than the GC grace period, one naming no pod, and one whose pod runs and lists it are alive. An
address of an IPAMClaim or a sticky StatefulSet is alive while its owner exists, and after that
while a pod is still bound to it (a StatefulSet scaled down whose pod still runs). An
embedded store (--db) has no pod API to ask, so every owner there counts as alive: release with
--db always needs --force, after checking that the container is gone.

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
    ADDRESS     POOL        POD              INTERFACE   NODE     RESULT
    10.78.0.5   ctlview-a   ctlview/gone-0   net1        node-b   Released

    $ netpoolctl release --pod shop/web-0 --interface net1 --yes
    $ netpoolctl --db /var/lib/cni/netpool/netpool.db release 10.77.0.2 --force`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := parseFormat(opts.output)
			if err != nil {
				return err
			}
			match, err := rf.matcher(args)
			if err != nil {
				return err
			}
			src, err := opts.source()
			if err != nil {
				return err
			}
			defer src.Close()
			return runRelease(cmd, src, f, rf, match)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&rf.pod, "pod", "", "release the addresses of this pod, NAMESPACE/NAME")
	fl.StringVar(&rf.iface, "interface", "", "with --pod, only the address of this interface (such as net1)")
	fl.StringVar(&rf.pool, "pool", "", "only the allocation of this pool (when pools of different networks hold the same IP)")
	fl.BoolVar(&rf.force, "force", false, "release even while the owner is alive")
	fl.BoolVarP(&rf.yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

// matcher checks the arguments and returns what selects the allocations to release, and what
// it says in an error when nothing matches.
func (rf releaseFlags) matcher(args []string) (func(inventory.Allocation) bool, error) {
	switch {
	case len(args) == 1 && rf.pod != "":
		return nil, fmt.Errorf("give an IP or --pod, not both")
	case len(args) == 0 && rf.pod == "":
		return nil, fmt.Errorf("give the IP to release, or --pod NAMESPACE/NAME")
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
	ns, name, ok := gcpolicy.SplitPodRef(rf.pod)
	if !ok || strings.Contains(name, "/") {
		return nil, fmt.Errorf("--pod %q: want NAMESPACE/NAME", rf.pod)
	}
	return func(a inventory.Allocation) bool {
		return a.Namespace == ns && a.PodName == name && (rf.iface == "" || a.Interface == rf.iface) && inPool(a)
	}, nil
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

func runRelease(cmd *cobra.Command, src inventory.Source, f format, rf releaseFlags, match func(inventory.Allocation) bool) error {
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
		return fmt.Errorf("refusing to release while the owner is alive; nothing released (--force releases anyway):\n  %s", strings.Join(alive, "\n  "))
	}
	if !rf.yes {
		if err := confirmRelease(cmd.InOrStdin(), cmd.ErrOrStderr(), picked); err != nil {
			return err
		}
	}
	doc := releaseDoc{docHeader: newDocHeader("Release", src), Released: []allocationView{}}
	t := &table{columns: []column{
		{header: "address"}, {header: "pool"}, {header: "pod"}, {header: "interface"}, {header: "node"},
		{header: "container", wide: true}, {header: "pod uid", wide: true}, {header: "result"},
	}}
	var failure error
	for _, a := range picked {
		released, err := src.Release(ctx, a)
		if err != nil {
			failure = err
			break
		}
		result := "Released"
		if released {
			doc.Released = append(doc.Released, viewOfAllocation(a))
		} else {
			result = "Unchanged (released or claimed anew meanwhile)"
			doc.Unchanged = append(doc.Unchanged, viewOfAllocation(a))
		}
		t.add(a.Address.String(), a.Pool, a.Pod(), a.Interface, a.Node, a.ContainerID, a.PodUID, result)
	}
	if err := emit(cmd.OutOrStdout(), f, t, doc); err != nil {
		return err
	}
	switch {
	case failure != nil:
		return fmt.Errorf("released %d of %d, then: %w", len(doc.Released), len(picked), failure)
	case len(doc.Unchanged) > 0:
		return fmt.Errorf("%d of %d were no longer the claim that was read, and were left alone", len(doc.Unchanged), len(picked))
	}
	return nil
}

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
	return fmt.Errorf("not confirmed: nothing released")
}
