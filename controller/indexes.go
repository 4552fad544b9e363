package controller

import (
	"context"
	"fmt"
	"slices"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/allocator/ippool"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// Cache field indexes. Each lets a reconciler find the few objects related to one event without
// reading every object of the kind.
const (
	// reservationPodField indexes reservations by the pods they name ("namespace/name"): spec.podRef
	// and, for a persistently owned address, each user's podRef. A pod event finds the
	// reservations of that pod, including one whose holder has moved on (a finished migration's
	// source, whose user the GC removes once the pod is gone).
	reservationPodField = "spec.podRef"
	// reservationNodeField indexes reservations by spec.node: a deleted node's reservations.
	reservationNodeField = "spec.node"
	// reservationNodePoolField indexes reservations by "node/pool": a slice's candidates.
	reservationNodePoolField = "spec.node+pool"
	// sliceNodeField indexes slices by spec.node: a deleted node's slices.
	sliceNodeField = "spec.node"
	// sliceNodePoolField indexes slices by "node/pool": the slices a reservation may sit in.
	sliceNodePoolField = "spec.node+pool"
	// poolNetworkField indexes pools by spec.networkName: the pools whose ranges must not overlap.
	poolNetworkField = "spec.networkName"
	// nadPoolField indexes NADs by the IPPool names their netpool IPAM sections derive or
	// reference: a pool event finds the NADs to check again.
	nadPoolField = "ipam.pools"
	// reservationPoolField and slicePoolField index reservations and slices by spec.pool: what a
	// pool still holds before it may be removed.
	reservationPoolField = "spec.pool"
	slicePoolField       = "spec.pool"
)

// indexer is the part of client.FieldIndexer setupIndexes needs.
type indexer interface {
	IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error
}

// fieldIndex is one cache index: the kind, the field name and the function giving its values.
type fieldIndex struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

// fieldIndexes lists every index the reconcilers use.
func fieldIndexes() []fieldIndex {
	return append(baseIndexes(), nadIndexes()...)
}

// baseIndexes are the indexes of netpool's own kinds and the built-in ones, registered before the
// manager starts.
func baseIndexes() []fieldIndex {
	return []fieldIndex{
		{&ipamv1.OverlappingRangeIPReservation{}, reservationPodField, reservationPod},
		{&ipamv1.OverlappingRangeIPReservation{}, reservationNodeField, reservationNode},
		{&ipamv1.OverlappingRangeIPReservation{}, reservationNodePoolField, reservationNodePool},
		{&ipamv1.OverlappingRangeIPReservation{}, reservationOwnerField, reservationOwner},
		{&ipamv1.IPPoolSlice{}, sliceNodeField, sliceNode},
		{&ipamv1.IPPoolSlice{}, sliceNodePoolField, sliceNodePool},
		{&ipamv1.IPPool{}, poolNetworkField, poolNetwork},
	}
}

// nadIndexes are the indexes of NetworkAttachmentDefinitions, registered once their CRD is served
// (nadGate): indexing a kind the API server does not serve fails.
func nadIndexes() []fieldIndex {
	return []fieldIndex{
		{&nadv1.NetworkAttachmentDefinition{}, nadPoolField, nadPools},
		{&ipamv1.OverlappingRangeIPReservation{}, reservationPoolField, reservationPool},
		{&ipamv1.IPPoolSlice{}, slicePoolField, slicePool},
	}
}

// setupIndexes registers the indexes with the manager's cache.
func setupIndexes(ctx context.Context, idx indexer, indexes []fieldIndex) error {
	for _, f := range indexes {
		if err := idx.IndexField(ctx, f.obj, f.field, f.extract); err != nil {
			return fmt.Errorf("failed to index %T by %s: %w", f.obj, f.field, err)
		}
	}
	return nil
}

func reservationPod(obj client.Object) []string {
	r, ok := obj.(*ipamv1.OverlappingRangeIPReservation)
	if !ok {
		return nil
	}
	var refs []string
	if r.Spec.PodRef != "" {
		refs = append(refs, r.Spec.PodRef)
	}
	for _, u := range r.Spec.Users {
		if u.PodRef != "" && !slices.Contains(refs, u.PodRef) {
			refs = append(refs, u.PodRef)
		}
	}
	return refs
}

func reservationNode(obj client.Object) []string {
	r, ok := obj.(*ipamv1.OverlappingRangeIPReservation)
	if !ok || r.Spec.Node == "" {
		return nil
	}
	return []string{r.Spec.Node}
}

func reservationNodePool(obj client.Object) []string {
	r, ok := obj.(*ipamv1.OverlappingRangeIPReservation)
	if !ok {
		return nil
	}
	return []string{nodePoolKey(r.Spec.Node, r.Spec.Pool)}
}

func sliceNode(obj client.Object) []string {
	s, ok := obj.(*ipamv1.IPPoolSlice)
	if !ok {
		return nil
	}
	return []string{s.Spec.Node}
}

func sliceNodePool(obj client.Object) []string {
	s, ok := obj.(*ipamv1.IPPoolSlice)
	if !ok {
		return nil
	}
	return []string{nodePoolKey(s.Spec.Node, s.Spec.Pool)}
}

func reservationPool(obj client.Object) []string {
	r, ok := obj.(*ipamv1.OverlappingRangeIPReservation)
	if !ok {
		return nil
	}
	return []string{r.Spec.Pool}
}

func slicePool(obj client.Object) []string {
	s, ok := obj.(*ipamv1.IPPoolSlice)
	if !ok {
		return nil
	}
	return []string{s.Spec.Pool}
}

func poolNetwork(obj client.Object) []string {
	p, ok := obj.(*ipamv1.IPPool)
	if !ok {
		return nil
	}
	return []string{p.Spec.NetworkName}
}

// nadPools gives the pools a NAD's netpool IPAM sections use; a config that does not parse uses
// none.
func nadPools(obj client.Object) []string {
	nad, ok := obj.(*nadv1.NetworkAttachmentDefinition)
	if !ok {
		return nil
	}
	sections, err := ipam.FromNetworkConfig([]byte(nad.Spec.Config))
	if err != nil {
		return nil
	}
	var names []string
	for _, s := range sections {
		names = append(names, sectionPools(s.Config)...)
	}
	return names
}

// sectionPools gives the pools one IPAM section uses: the referenced pool, or one derived pool per
// inline range. A section on the embedded (bbolt) datastore keeps its state on each node and uses
// no pool.
func sectionPools(c *ipam.Config) []string {
	if c.Datastore != ipam.DatastoreKubernetes {
		return nil
	}
	if c.Pool != "" {
		return []string{c.Pool}
	}
	names := make([]string, len(c.Ranges))
	for i, r := range c.Ranges {
		names[i] = ippool.DerivedName(c.NetworkName, r.Subnet)
	}
	return names
}

// nodePoolKey is the value of the node+pool indexes.
func nodePoolKey(node, pool string) string {
	return node + "/" + pool
}
