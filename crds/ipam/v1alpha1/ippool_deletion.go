package v1alpha1

// IPPoolFinalizer is the finalizer the controller puts on every IPPool. It holds a deleted pool
// until no OverlappingRangeIPReservation names it in spec.pool, so that deleting a pool in use
// never leaves reservations that point at nothing (GC and the agents could then no longer tell
// which range an address belonged to). The controller then deletes the pool's IPPoolSlices and
// removes the finalizer.
const IPPoolFinalizer = GroupName + "/reservations"

// IPPoolDeletionBlockedCondition is True while a deleted pool waits for its reservations to be
// released; its reason is IPPoolReservationsHeldReason and its message says how many are held and
// how to list them. It is absent on a pool that is not being deleted.
const IPPoolDeletionBlockedCondition = "DeletionBlocked"

const (
	// IPPoolReservationsHeldReason is the DeletionBlocked=True reason, and the Ready=False reason
	// of a deleted pool: reservations still name the pool.
	IPPoolReservationsHeldReason = "ReservationsHeld"
)
