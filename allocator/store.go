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
}

// Pool is what a store needs to pick an address: the pool's identity, the range (window and
// exclusions) of the config asking, and the overlap scope ("" when overlapping ranges are off).
type Pool struct {
	Key   string
	Range ipam.Range
	Scope string
}

// Store persists allocations. Update runs fn so that either all of its claims and releases take
// effect or none do; View runs fn against a consistent snapshot.
type Store interface {
	Update(ctx context.Context, fn func(Txn) error) error
	View(ctx context.Context, fn func(Txn) error) error
	Close() error
}

// Txn is the store's view inside one Update or View. Every method costs O(log n) in the number of
// allocations, and nothing in the size of the range, except ForEach, which visits the pool.
type Txn interface {
	// Get returns the allocation of owner in pool.
	Get(pool string, owner Owner) (Allocation, bool, error)
	// ClaimNext claims the next free allowed address after the pool's last claim (round-robin,
	// so a crash-looping container does not get its old address straight back), wrapping once.
	// It sets a.Addr and returns ErrPoolExhausted when nothing is free.
	ClaimNext(p Pool, a *Allocation) error
	// Claim claims a.Addr, or returns ErrAddressInUse naming the holder.
	Claim(p Pool, a *Allocation) error
	// Release frees owner's address in pool, if any.
	Release(pool string, owner Owner) (Allocation, bool, error)
	// ForEach visits every allocation of pool in address order.
	ForEach(pool string, fn func(Allocation) error) error
	// HasFree reports whether ClaimNext would succeed.
	HasFree(p Pool) (bool, error)
}
