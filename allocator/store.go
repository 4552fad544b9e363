package allocator

import (
	"context"
	"net/netip"
	"time"

	"github.com/netpool/netpool/ipam"
)

// Owner identifies one attachment: the CNI (containerID, ifName) pair.
type Owner struct {
	ContainerID string
	IfName      string
}

// Allocation is one address held by one attachment in one pool.
type Allocation struct {
	Pool    string
	Addr    netip.Addr
	Owner   Owner
	Network string // CNI network name, the scope of GC
	Pod     ipam.PodRef
	Scope   string // the overlap scope it is also recorded in, released with it ("" = none)
	Created time.Time
	// Persistent is the persistent owner of the address (PersistentTxn), "" when the attachment
	// owns it.
	Persistent string
}

// Pool is what a store needs to pick an address: the pool's identity, the range (window and
// exclusions) of the config asking, the overlap scope ("" when overlapping ranges are off), and
// the reuse cool-down with the instant it is measured against (see cooldown.go).
type Pool struct {
	Key   string
	Range ipam.Range
	Scope string
	// Cooldown is the pool's reuse cool-down (0: off). Now is the engine's clock at this call.
	Cooldown time.Duration
	Now      time.Time
}

// OverlapScope is the overlap scope of a network with enable_overlapping_ranges on: whereabouts
// makes an address unique per network name then, so two networks with different names may reuse
// it, while every pool of one network name shares it.
func OverlapScope(networkName string) string { return "net:" + networkName }

// Store persists allocations. What every store guarantees (the conformance suite in
// allocator/storetest holds each store to it):
//
//   - No address is held twice: within one pool, and, when a Pool has a Scope, within every pool
//     of that scope. A claim is atomic against every other claim, in this process or another.
//   - Two Updates or Views for one attachment never interleave.
//   - When fn fails, no claim it made survives. Releases may already have taken effect (the
//     Kubernetes store does not undo them), so the engine never mixes claims and releases in one
//     Update: ADD only claims, DEL and GC only release, and both are repeated by the runtime.
//   - View changes nothing. It is not promised to be a snapshot of every pool at one instant.
//   - The ctx passed to fn bounds the call (the caller's deadline, and any bound of the store's
//     own); fn passes it to every Txn method. Stores keep no context of their own.
//
// Each store documents what it adds: package boltstore makes Update all-or-none and View a
// snapshot; package kubestore documents its limits in its own doc.
type Store interface {
	Update(ctx context.Context, fn func(context.Context, Txn) error) error
	View(ctx context.Context, fn func(context.Context, Txn) error) error
	Close() error
}

// Txn is the store's view inside one Update or View. No method costs anything in the size of the
// range (a /8 costs what a /24 costs); how a cost grows with the number of allocations is each
// store's to state (bbolt: O(log n) but ForEach; Kubernetes: see HasFree).
type Txn interface {
	// Get returns the allocation of owner in pool.
	Get(ctx context.Context, pool string, owner Owner) (Allocation, bool, error)
	// ClaimNext claims a free allowed address, or returns ErrPoolExhausted when nothing in the
	// range is free: exhaustion comes exactly at capacity. It prefers the next free address after
	// the pool's last claim, wrapping once (round-robin, so a crash-looping container does not get
	// its old address straight back) among the addresses the store draws from: the whole range in
	// the embedded store, the node's blocks in the Kubernetes store, where a node holding a single
	// one-address block gets a released address straight back. With p.Cooldown set it passes over
	// addresses released less than that before p.Now while another is free, and when only those
	// remain it takes the one released longest ago (cooldown.go). It sets a.Addr.
	ClaimNext(ctx context.Context, p Pool, a *Allocation) error
	// Claim claims a.Addr, or returns ErrAddressInUse naming the holder. A cooling address is
	// granted: an explicit request wins over the cool-down.
	Claim(ctx context.Context, p Pool, a *Allocation) error
	// Release frees owner's address in pool p.Key, if any. With p.Cooldown set, the address cools
	// from p.Now.
	Release(ctx context.Context, p Pool, owner Owner) (Allocation, bool, error)
	// ForEach visits allocations of pool in address order: every one in the embedded store, the
	// node's own in the Kubernetes store (GC on a node releases only that node's attachments).
	ForEach(ctx context.Context, pool string, fn func(Allocation) error) error
	// HasFree reports whether ClaimNext would succeed.
	HasFree(ctx context.Context, p Pool) (bool, error)
}
