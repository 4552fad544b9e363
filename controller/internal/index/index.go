// Package index holds the informer cache's field indexes: each lets a reconciler find the few
// objects related to one event without reading every object of the kind. The manager registers
// them once (Base before it starts, NAD once the NAD CRD is served); the reconcilers list by their
// names.
package index

import (
	"context"
	"fmt"
	"slices"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/ippool"
	"github.com/netpool/netpool/ipam"
)

// The indexes' field names.
const (
	// ReservationPod indexes reservations by the pods they name ("namespace/name"): spec.podRef
	// and, for a persistently owned address, each user's podRef. A pod event finds the
	// reservations of that pod, including one whose holder has moved on (a finished migration's
	// source, whose user the GC removes once the pod is gone).
	ReservationPod = "spec.podRef"
	// ReservationNode indexes reservations by spec.node: a deleted node's reservations.
	ReservationNode = "spec.node"
	// ReservationNodePool indexes reservations by "node/pool" (NodePoolKey): a slice's candidates.
	ReservationNodePool = "spec.node+pool"
	// ReservationOwner indexes reservations by the object that owns them
	// (ReservationOwner.ObjectKey): a deleted claim, or a StatefulSet deleted or scaled, finds its
	// addresses.
	ReservationOwner = "spec.owner"
	// SliceNode indexes slices by spec.node: a deleted node's slices.
	SliceNode = "spec.node"
	// SliceNodePool indexes slices by "node/pool" (NodePoolKey): the slices a reservation may sit in.
	SliceNodePool = "spec.node+pool"
	// PoolNetwork indexes pools by spec.networkName: the pools whose ranges must not overlap.
	PoolNetwork = "spec.networkName"
	// NADPool indexes NADs by the IPPool names their netpool IPAM sections derive or reference
	// (NADPools): a pool event finds the NADs to check again.
	NADPool = "ipam.pools"
	// ReservationPool and SlicePool index reservations and slices by spec.pool: what a pool still
	// holds before it may be removed.
	ReservationPool = "spec.pool"
	SlicePool       = "spec.pool"
)

// Indexer is the part of client.FieldIndexer Setup needs.
type Indexer interface {
	IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error
}

// Field is one cache index: the kind, the field name and the function giving its values.
type Field struct {
	Obj     client.Object
	Name    string
	Extract client.IndexerFunc
}

// All lists every index the reconcilers use.
func All() []Field {
	return append(Base(), NAD()...)
}

// Base are the indexes of netpool's own kinds and the built-in ones, registered before the
// manager starts.
func Base() []Field {
	return []Field{
		{&ipamv1.OverlappingRangeIPReservation{}, ReservationPod, reservationPod},
		{&ipamv1.OverlappingRangeIPReservation{}, ReservationNode, reservationNode},
		{&ipamv1.OverlappingRangeIPReservation{}, ReservationNodePool, reservationNodePool},
		{&ipamv1.OverlappingRangeIPReservation{}, ReservationOwner, reservationOwner},
		{&ipamv1.IPPoolSlice{}, SliceNode, sliceNode},
		{&ipamv1.IPPoolSlice{}, SliceNodePool, sliceNodePool},
		{&ipamv1.IPPool{}, PoolNetwork, PoolNetworks},
	}
}

// NAD are the indexes of NetworkAttachmentDefinitions (and what a derived pool's removal reads
// with them), registered once the NAD CRD is served: indexing a kind the API server does not
// serve fails.
func NAD() []Field {
	return []Field{
		{&nadv1.NetworkAttachmentDefinition{}, NADPool, NADPools},
		{&ipamv1.OverlappingRangeIPReservation{}, ReservationPool, ReservationPools},
		{&ipamv1.IPPoolSlice{}, SlicePool, SlicePools},
	}
}

// Setup registers the indexes with the manager's cache.
func Setup(ctx context.Context, idx Indexer, fields []Field) error {
	for _, f := range fields {
		if err := idx.IndexField(ctx, f.Obj, f.Name, f.Extract); err != nil {
			return fmt.Errorf("failed to index %T by %s: %w", f.Obj, f.Name, err)
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
	return []string{NodePoolKey(r.Spec.Node, r.Spec.Pool)}
}

func reservationOwner(obj client.Object) []string {
	r, ok := obj.(*ipamv1.OverlappingRangeIPReservation)
	if !ok || r.Spec.Owner == nil {
		return nil
	}
	return []string{r.Spec.Owner.ObjectKey()}
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
	return []string{NodePoolKey(s.Spec.Node, s.Spec.Pool)}
}

// ReservationPools is the ReservationPool index's value of a reservation: its pool.
func ReservationPools(obj client.Object) []string {
	r, ok := obj.(*ipamv1.OverlappingRangeIPReservation)
	if !ok {
		return nil
	}
	return []string{r.Spec.Pool}
}

// SlicePools is the SlicePool index's value of a slice: its pool.
func SlicePools(obj client.Object) []string {
	s, ok := obj.(*ipamv1.IPPoolSlice)
	if !ok {
		return nil
	}
	return []string{s.Spec.Pool}
}

// PoolNetworks is the PoolNetwork index's value of a pool: its network.
func PoolNetworks(obj client.Object) []string {
	p, ok := obj.(*ipamv1.IPPool)
	if !ok {
		return nil
	}
	return []string{p.Spec.NetworkName}
}

// NADPools gives the pools a NAD's netpool IPAM sections use (the NADPool index's value); a config
// that does not parse uses none.
func NADPools(obj client.Object) []string {
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

// NodePoolKey is the value of the node+pool indexes.
func NodePoolKey(node, pool string) string {
	return node + "/" + pool
}
