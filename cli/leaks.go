package cli

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/gcpolicy"
	"github.com/netpool/netpool/internal/kubeclient"
)

// leakReport is the json and yaml schema of `netpoolctl leaks` (docs/cli-output.md).
type leakReport struct {
	docHeader
	// Grace is the age below which a reservation is never called leaked, as a Go duration.
	Grace string `json:"grace"`
	// Leaks are the leaked reservations, by pool and address.
	Leaks []leak `json:"leaks"`
}

// leak is one reservation the controller's GC policy judges leaked.
type leak struct {
	Reservation string `json:"reservation"`
	// UID and ResourceVersion are the reservation's as judged: release --from-report releases
	// only that object, never one claimed anew under the same name.
	UID             string    `json:"uid,omitempty"`
	ResourceVersion string    `json:"resourceVersion,omitempty"`
	Address         string    `json:"address"`
	Pool            string    `json:"pool"`
	NetworkName     string    `json:"networkName,omitempty"`
	Pod             string    `json:"pod"`
	PodUID          string    `json:"podUID,omitempty"`
	Node            string    `json:"node"`
	ContainerID     string    `json:"containerID"`
	Interface       string    `json:"interface"`
	Created         time.Time `json:"created"`
	// Reason is one of the gcpolicy reasons: PodDeleted, PodReplaced, PodFinished,
	// NotInNetworkStatus, NodeDeleted, OwnerDeleted, OwnerScaledDown, Superseded.
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// errNoLivenessInBolt is what leaks says of an embedded store: nothing in the file or on the host
// says which pods live, so the GC policy has no facts to judge by.
var errNoLivenessInBolt = errors.New("leaks needs a cluster: an embedded (--db) store records no pod liveness to judge " +
	"its allocations by. Its leaks are reclaimed by CNI GC: the runtime passes the attachments it still runs, " +
	"and the plugin releases every other allocation of the network (see docs/embedded-store.md). " +
	"Use `netpoolctl --db PATH check` to verify the file")

// errLeaksFound is leaks' error when it lists a leak: the command exits 1, as check does on a
// finding, so a script tests for leaks by the exit status.
var errLeaksFound = errors.New("found leaked reservations")

func newLeaks(opts *options) *cobra.Command {
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "leaks",
		Short: "List reservations whose owner is gone, by the controller's GC policy (read-only)",
		Long: `leaks lists the reservations that the controller's garbage collector judges leaked, with
the reason and the detail of each: the same policy code (package internal/gcpolicy), so
leaks never names a reservation the controller would keep, nor hides one it would release.
A reservation counts as leaked when it is older than --grace and its pod was deleted
(PodDeleted), replaced by a pod of the same name with another UID (PodReplaced), has
Succeeded or Failed (PodFinished), or runs while its network-status no longer lists the
address (NotInNetworkStatus); an address an IPAMClaim or a sticky StatefulSet owns counts only when that owner is
gone (OwnerDeleted) or, for a StatefulSet, no longer reaches its ordinal (OwnerScaledDown), and no pod is bound to
it any more, or when no pod is bound to it and its owner's pod is bound to another of its addresses in the pool
(Superseded); and, by the node reclaim's rule, one whose node no longer exists
(NodeDeleted; not an EgressRouter's or a claim's address, nor one whose pod runs on another
node). A reservation without a pod identity or an owner is never listed. leaks changes
nothing; release an address with netpoolctl release, or every address of the report with
netpoolctl release --from-report (each judged again when it is released).

leaks exits 1 when it lists a leak and 0 when there is none, as check does, so a script can
test for leaks by the exit status alone (any other failure exits 1 too, with its error on
standard error and nothing on standard output).

leaks reads the reservations, then the pods and the nodes, once each, so its answer is one
snapshot (and each claim a claimed address names). It needs a cluster: an embedded store (--db) records no pod liveness, and CNI GC
is its mechanism for leaks.

Examples:
  # Every leaked reservation in the cluster
  netpoolctl leaks

  # The leaks of pods of one namespace, as JSON
  netpoolctl leaks -n team-a -o json

  # Release every leak of a report, each judged again now
  netpoolctl leaks -o json > leaks.json; netpoolctl release --from-report leaks.json

  # Count reservations as leaked only after ten minutes
  netpoolctl leaks --grace 10m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pr, err := opts.print.printer()
			if err != nil {
				return err
			}
			if grace < 0 {
				return fmt.Errorf("--grace must not be negative, not %s", grace)
			}
			embedded, err := opts.embedded()
			if err != nil {
				return err
			}
			if embedded {
				return errNoLivenessInBolt
			}
			c, err := opts.kubeClient()
			if err != nil {
				return err
			}
			leaks, err := findLeaks(cmd.Context(), c, opts.namespace(), opts.now(), grace, func(r *ipamv1.OverlappingRangeIPReservation, v gcpolicy.Verdict) {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: reservation %s (%s) cannot be judged and is kept: %s\n", r.Name, r.Spec.Address, v.Detail)
			})
			if err != nil {
				return err
			}
			if len(leaks) == 0 && pr.tabular() {
				_, err := fmt.Fprintf(cmd.ErrOrStderr(), "No leaked reservations (grace %s).\n", grace)
				return err
			}
			doc := &leakReport{docHeader: docHeader{APIVersion: schemaVersion, Kind: "LeakList", Source: "cluster"}, Grace: grace.String(), Leaks: leaks}
			if err := pr.print(cmd.OutOrStdout(), output{doc: doc, items: "leaks", table: leakTable(leaks, opts.now())}); err != nil {
				return err
			}
			if n := len(leaks); n > 0 {
				return fmt.Errorf("%w: %d (grace %s)", errLeaksFound, n, grace)
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", gcpolicy.DefaultGrace, "a reservation younger than this is never leaked (the controller's --gc-grace)")
	return cmd
}

// findLeaks judges every reservation (of pods in namespace, when set) by the GC policy as of
// now; unjudgeable is told of each reservation kept only because its pod's facts say nothing.
func findLeaks(ctx context.Context, c kubeclient.Reader, namespace string, now time.Time, grace time.Duration,
	unjudgeable func(*ipamv1.OverlappingRangeIPReservation, gcpolicy.Verdict)) ([]leak, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	var reservations ipamv1.OverlappingRangeIPReservationList
	if err := c.List(ctx, &reservations); err != nil {
		return nil, fmt.Errorf("failed to list the reservations: %w", err)
	}
	// The pods are listed after the reservations: a pod whose reservation was listed existed
	// before it, so it is in this list unless it was deleted since.
	pods, err := listPods(ctx, c, namespace)
	if err != nil {
		return nil, err
	}
	nodes, err := listNodeNames(ctx, c)
	if err != nil {
		return nil, err
	}
	leaks := []leak{}
	for i := range reservations.Items {
		r := &reservations.Items[i]
		if ns, _, ok := gcpolicy.SplitPodRef(r.Spec.PodRef); namespace != "" && (!ok || ns != namespace) {
			continue
		}
		if !gcpolicy.Judgeable(r) {
			continue
		}
		facts, err := gcpolicy.Read(ctx, pods, r)
		if err != nil {
			return nil, err
		}
		v := gcpolicy.Judge(r, facts, now, grace)
		if v.Reason == "" && v.Recheck == 0 && r.Spec.Node != "" && !nodes[r.Spec.Node] {
			// The node reclaim's rule: the controller releases this once the node has been gone
			// for its grace period, which a reservation at least that old stands for here.
			v = gcpolicy.OnDeletedNode(r, facts.Pod, r.Spec.Node)
		}
		if v.Reason == "" {
			if v.Detail != "" && unjudgeable != nil {
				unjudgeable(r, v)
			}
			continue
		}
		leaks = append(leaks, leak{
			Reservation: r.Name, UID: string(r.UID), ResourceVersion: r.ResourceVersion, Address: r.Spec.Address, Pool: r.Spec.Pool, NetworkName: r.Spec.NetworkName,
			Pod: r.Spec.PodRef, PodUID: r.Spec.PodUID, Node: r.Spec.Node,
			ContainerID: r.Spec.ContainerID, Interface: r.Spec.IfName,
			Created: r.CreationTimestamp.UTC(), Reason: v.Reason, Detail: v.Detail,
		})
	}
	slices.SortFunc(leaks, func(a, b leak) int {
		if c := strings.Compare(a.Pool, b.Pool); c != 0 {
			return c
		}
		x, errX := netip.ParseAddr(a.Address)
		y, errY := netip.ParseAddr(b.Address)
		if errX == nil && errY == nil {
			return x.Compare(y)
		}
		return strings.Compare(a.Address, b.Address)
	})
	return leaks, nil
}

// leakColumns are leaks's table (docs/cli-output.md lists them; a test compares).
var leakColumns = []column{
	{header: "address"}, {header: "pool"}, {header: "pod"}, {header: "pod uid", wide: true},
	{header: "node", wide: true}, {header: "container", wide: true}, {header: "interface", wide: true},
	{header: "reservation", wide: true}, {header: "reason"}, {header: "age"}, {header: "detail"},
}

func leakTable(leaks []leak, now time.Time) *table {
	t := &table{columns: leakColumns}
	for _, l := range leaks {
		t.addNamed("overlappingrangeipreservation.ipam.netpool.io/"+l.Reservation, l.Address, l.Pool, l.Pod, l.PodUID, l.Node, l.ContainerID, l.Interface, l.Reservation,
			l.Reason, age(now, l.Created), l.Detail)
	}
	return t
}

// listNodeNames is the names of the cluster's Nodes.
func listNodeNames(ctx context.Context, c kubeclient.Reader) (map[string]bool, error) {
	var list corev1.NodeList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("failed to list the nodes: %w", err)
	}
	names := make(map[string]bool, len(list.Items))
	for _, n := range list.Items {
		names[n.Name] = true
	}
	return names, nil
}

// podSnapshot answers gcpolicy.Read's pod lookups from one list of pods, so judging n
// reservations costs one request instead of n. What else the policy reads (a persistent owner,
// such as an IPAMClaim) it reads from the cluster.
type podSnapshot struct {
	pods map[types.NamespacedName]*corev1.Pod
	live kubeclient.Reader
}

func listPods(ctx context.Context, c kubeclient.Reader, namespace string) (podSnapshot, error) {
	var list corev1.PodList
	if err := c.List(ctx, &list, kubeclient.InNamespace(namespace)); err != nil {
		return podSnapshot{}, fmt.Errorf("failed to list the pods: %w", err)
	}
	s := podSnapshot{pods: make(map[types.NamespacedName]*corev1.Pod, len(list.Items)), live: c}
	for i := range list.Items {
		p := &list.Items[i]
		s.pods[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
	}
	return s, nil
}

func (s podSnapshot) Get(ctx context.Context, key kubeclient.ObjectKey, obj kubeclient.Object) error {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return s.live.Get(ctx, key, obj)
	}
	p, found := s.pods[key]
	if !found {
		return apierrors.NewNotFound(corev1.Resource("pods"), key.Name)
	}
	p.DeepCopyInto(pod)
	return nil
}

// List answers from the cluster, except for pods: the policy lists a persistent owner's
// reservations, never pods.
func (s podSnapshot) List(ctx context.Context, list kubeclient.ObjectList, opts ...kubeclient.ListOption) error {
	if _, ok := list.(*corev1.PodList); ok {
		return errors.New("the pod snapshot answers Get only")
	}
	return s.live.List(ctx, list, opts...)
}
