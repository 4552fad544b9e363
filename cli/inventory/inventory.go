// Package inventory is netpoolctl's read model of allocations: the pools, the addresses they hand
// out and who holds them, read from a cluster (IPPools, reservations, slices) or from an embedded
// bbolt file, in one shape, so every command prints both the same way. The pool math is
// internal/ippool's, the one pool model; nothing here computes a range of its own.
package inventory

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/netpool/netpool/internal/ippool"
)

// Source is where the allocations live.
type Source interface {
	// Kind is "cluster" or "bbolt", for the json/yaml documents.
	Kind() string
	// Pools lists every pool, sorted by name.
	Pools(ctx context.Context) ([]Pool, error)
	// Allocations lists the allocations of pool, or of every pool when pool is "", sorted by
	// pool and address.
	Allocations(ctx context.Context, pool string) ([]Allocation, error)
	// Slices lists the node slices of pool, sorted by range; ErrNoSlices where there are none
	// to have (an embedded store).
	Slices(ctx context.Context, pool string) ([]Slice, error)
	// Alive reports whether a's owner is alive, and why: a release needs --force then.
	Alive(ctx context.Context, a Allocation) (bool, string, error)
	// Release releases a if it is still the same claim; false when it was released or claimed
	// anew meanwhile.
	Release(ctx context.Context, a Allocation) (bool, error)
	Close() error
}

// ErrNoSlices is Slices' error for a store without node slices.
var ErrNoSlices = errors.New("an embedded store has no node slices: one host allocates from the whole range")

// Pool is one pool with its usage.
type Pool struct {
	// Name is the IPPool's name, or the embedded pool key (ipam.PoolKey).
	Name    string
	Network string
	// Model is the pool parsed by internal/ippool; nil when the range is unknown or invalid,
	// RangeErr saying why.
	Model    *ippool.Pool
	RangeErr string
	// Subnet is the pool's CIDR, known even when the rest of its range is not (from the IPPool's
	// spec.range, or the embedded pool key); invalid when not even that is.
	Subnet netip.Prefix
	// Used is the number of addresses held in the pool.
	Used int64
	// Ready is the pool's Ready condition ("True", "False (<reason>)"), "" when there is none.
	Ready string
	// NotServing says why the pool hands out nothing now, by the agent's own rules: the
	// controller's verdict (ippool.Serving) or, before the controller has judged, an overlap
	// with a peer that the pool yields to (ippool.OverlapText); "" when it serves. Cluster only.
	NotServing string
	Created    time.Time
}

// Allocation is one held address.
type Allocation struct {
	Pool        string
	Address     netip.Addr
	Namespace   string
	PodName     string
	PodUID      string
	ContainerID string
	Interface   string
	Node        string
	// Network is the CNI network name of the attachment.
	Network string
	Created time.Time
	// ref is the store's own handle of the claim, for Alive and Release.
	ref any
}

// Pod is "namespace/name", or "" without a pod identity.
func (a Allocation) Pod() string {
	if a.Namespace == "" && a.PodName == "" {
		return ""
	}
	return a.Namespace + "/" + a.PodName
}

// Slice is one node's block of a pool.
type Slice struct {
	Name    string
	Pool    string
	Range   netip.Prefix
	Node    string
	Used    int64
	Created time.Time
}

// ErrUnknownPool is the error of a pool name that no pool has.
var ErrUnknownPool = errors.New("no such pool")
