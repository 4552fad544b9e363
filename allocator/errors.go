package allocator

import "errors"

// Allocation errors. The CNI boundary maps each to an error code with errors.Is; the wrapping
// error names the pool, address and holder.
var (
	// ErrPoolExhausted is returned when a range has no address left that may be handed out.
	ErrPoolExhausted = errors.New("pool exhausted")
	// ErrAddressInUse is returned when a requested address is held by another attachment.
	ErrAddressInUse = errors.New("address in use")
	// ErrAddressNotAllowed is returned when a requested address lies outside the range's window,
	// is excluded, or is the gateway, network or broadcast address.
	ErrAddressNotAllowed = errors.New("address not allowed")
	// ErrAttachmentConflict is returned when an attachment already holds an address in a range and
	// asks for a different one.
	ErrAttachmentConflict = errors.New("attachment already holds a different address")
	// ErrCheckFailed is returned by CHECK when the runtime's view and the store disagree.
	ErrCheckFailed = errors.New("allocation check failed")
	// ErrStoreBusy is returned when the store's lock could not be taken in time; retrying later
	// can succeed (CNI error 11).
	ErrStoreBusy = errors.New("store busy")
	// ErrStoreUnusable is returned when the store cannot be opened or is corrupt.
	ErrStoreUnusable = errors.New("store unusable")
	// ErrPersistentOwnerInvalid is returned when an attachment names a persistent owner it may not
	// use: an IPAMClaim for another network or interface, or a claim together with requested ips.
	ErrPersistentOwnerInvalid = errors.New("persistent owner invalid")
	// ErrPersistentOwnerNotFound is returned when the persistent owner an attachment names (an
	// IPAMClaim), or the pod that names it, does not exist.
	ErrPersistentOwnerNotFound = errors.New("persistent owner not found")
)
