package allocator

import (
	"context"

	"github.com/netpool/netpool/ipam"
)

// An address may belong to a persistent owner rather than to the attachment that holds it: an
// IPAMClaim (a KubeVirt VM's interface, which keeps its address across a restart and a live
// migration), or, in a pool with statefulSets: Sticky, a StatefulSet pod's identity (namespace,
// StatefulSet, ordinal, interface; in the embedded store the pod's name). The engine's rule, the same in every store that keeps such addresses:
//
//   - ADD of an attachment with a persistent owner first asks whether that owner already holds
//     an address in the pool; if so, the attachment is bound to it (re-bind) and nothing is
//     claimed. Only otherwise is an address claimed, recording the owner.
//   - DEL and GC of an attachment bound to a persistently owned address unbind it: the address
//     stays held, with no attachment or with the others still bound (a migration's source and
//     target are bound at once).
//   - Only the owner's end releases the address, outside the engine (the controller's GC).

// PersistentTxn is what a store adds to Txn to keep persistently owned addresses.
type PersistentTxn interface {
	// PersistentOwner returns the persistent owner of owner's addresses in this call with config
	// c, or "" when the attachment owns its addresses itself. An attachment that names an owner
	// which cannot be used (missing, or for another network or interface) is an error.
	PersistentOwner(ctx context.Context, c *ipam.Config, owner Owner) (string, error)
	// Rebind binds a.Owner to the address that the persistent owner a.Persistent holds in pool
	// p, and sets a.Addr. It reports false when that owner holds nothing in p. When a.Addr is
	// set on entry (the attachment requests it), Rebind binds only to that address: one the owner
	// holds elsewhere in p is released, and Rebind reports false, so that the engine claims the
	// requested address for the owner (a request wins, and is remembered).
	Rebind(ctx context.Context, p Pool, a *Allocation) (bool, error)
	// Unbind removes owner from the attachments bound to its persistently owned address in pool,
	// which stays held. It reports false, changing nothing, when owner's address there (if any)
	// has no persistent owner.
	Unbind(ctx context.Context, pool string, owner Owner) (Allocation, bool, error)
}
