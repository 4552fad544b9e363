// Package kubestore is netpool's Kubernetes store for the node agent, over a controller-runtime
// client and an informer cache that stay warm between CNI calls. A Store is the node's state; Bind
// returns the allocator.Store of one CNI call.
//
// Data model (docs/kubernetes-mode.md, "Data model and the slice algorithm"):
//
//   - An allocation is one OverlappingRangeIPReservation named ReservationName(scope, address),
//     created in one atomic Create: AlreadyExists means the address is taken, so the store tries
//     another. scope is the NAD's network_name when enable_overlapping_ranges is on (the address is
//     then unique across every pool of that network), else the pool's name. Reservations carry the
//     node and pool labels, and the CNI network name in ipamv1.NetworkAnnotation, which is what GC
//     matches on.
//   - Nodes pick candidates from IPPoolSlices they own: aligned blocks of the pool's range, claimed
//     by one Create of SliceName(pool, index). Two nodes therefore never race for one address; the
//     only cross-node contention is the claim of a new block, once per block. A slice only steers
//     candidates; the reservation stays the lock, so a stale or lost slice costs a retry, never a
//     duplicate.
//   - The agent watches only what its own node's work makes (DESIGN.md, invariant 9): its
//     reservations and slices, selected by node, and its Node; other nodes' blocks it learns by
//     claiming (blocks.go). IPPools are watched whole (the cluster's configuration), Namespaces only
//     once a pool selects them, as metadata.
//   - When every block of the range is claimed and the node's own blocks are full, the node borrows:
//     it lists the pool's reservations and creates one on any address still free, so a pool is
//     exhausted exactly at its capacity whatever the spread of pods over nodes.
//   - Choices of one node serialise per pool on an in-agent lock (the node-local lock), which is
//     never held across an API call, so a slow API server delays a call by its own requests. No
//     object grows with the number of allocations.
//
// Idempotency does not trust a cache that may lag: the store keeps a write-through index of this
// node's reservations, filled from an informer restricted to the node's label (synced before the
// store serves) and updated by the store's own Creates and Deletes, which tombstone what they
// removed until the informer agrees.
//
// When the API server does not answer, a write is retried until the call's bound and then fails
// with allocator.ErrStoreBusy (CNI error 11). A Create whose outcome is unknown (sent, no answer)
// is recorded as pending: the next call for the same attachment, or a background loop once the API
// server answers again, reads it back and either adopts it (that attachment asks again) or deletes
// it, so no half-made reservation outlives the outage.
//
// Against the allocator.Store contract (allocator/storetest checks it), this store undoes the
// claims of a failed Update but not its releases, its View is not a snapshot, its round-robin runs
// over the node's blocks, HasFree lists the scope's reservations once every block is claimed, and
// its reuse cool-down is the agent's memory, written behind to its slices (cooling.go);
// docs/kubernetes-mode.md lists these differences.
package kubestore
