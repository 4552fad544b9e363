package cli

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"
)

// podAllocations is the document of pod.
type podAllocations struct {
	docHeader
	Namespace   string           `json:"namespace"`
	Pod         string           `json:"pod"`
	Allocations []allocationView `json:"allocations"`
}

func newPod(opts *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pod [NAMESPACE/]NAME",
		Short: "List a pod's addresses across every pool",
		Long: `pod lists the addresses a pod holds, in every pool and network: each with its pool, interface,
node, persistent owner and age. The pod is NAMESPACE/NAME, or NAME with -n. In a cluster the API
server selects the pod's reservations on spec.podRef (a selectable field), so the answer costs
what the pod holds, not what the cluster holds; with --db the file's allocations are read. A pod
that holds nothing prints nothing (and the json document an empty list). -o json and -o yaml
print the PodAllocations document of docs/cli-output.md.

    $ netpoolctl pod ctlview/web-0
    ADDRESS      POOL        STATE   HOLDER          INTERFACE   NODE     OWNER    AGE
    10.78.0.2    ctlview-a   Held    ctlview/web-0   net1        node-a   <none>   10h
    fd00:78::2   ctlview-b   Held    ctlview/web-0   net2        node-a   <none>   10h`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("pod takes one pod, NAMESPACE/NAME or NAME with -n, not %d arguments", len(args))
			}
			return nil
		},
		ValidArgsFunction: completeArgs(opts, 1, completePods),
		RunE: func(cmd *cobra.Command, args []string) error {
			pr, err := opts.print.printer()
			if err != nil {
				return err
			}
			ns, name, err := podArg(args[0], opts.namespace(), "pod")
			if err != nil {
				return err
			}
			src, err := opts.source()
			if err != nil {
				return err
			}
			defer src.Close()
			as, err := src.PodAllocations(cmd.Context(), ns, name)
			if err != nil {
				return err
			}
			now := opts.now()
			doc := &podAllocations{docHeader: newDocHeader("PodAllocations", src), Namespace: ns, Pod: name, Allocations: []allocationView{}}
			t := &table{columns: podColumns}
			for _, a := range as {
				v := viewOfAllocation(a)
				doc.Allocations = append(doc.Allocations, v)
				since := ""
				if v.Created != nil {
					since = age(now, *v.Created)
				}
				t.addNamed(allocationObjectName(src, v), v.Address, v.Pool, stateHeld, v.Holder, v.Interface, v.Node, ownerText(v.Owner),
					v.PodUID, v.ContainerID, v.CNINetwork, v.Reservation, since)
			}
			return pr.print(cmd.OutOrStdout(), output{doc: doc, items: "allocations", table: t})
		},
	}
	return cmd
}

// podColumns are show's columns with the pool after the address: a pod's addresses span pools.
var podColumns = slices.Concat(allocationColumns[:1], []column{{header: "pool"}}, allocationColumns[1:])
