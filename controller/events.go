package controller

// Event reasons. Events are the controller's voice to the people who own the objects: a release
// is reported on the pod (else its pool), a bad NAD on the NAD.
const (
	// EventAddressReleased (Warning): GC released a leaked reservation; the note names the address,
	// the pool, the attachment and the release reason.
	EventAddressReleased = "AddressReleased"
	// EventLeakFound (Warning): a dry run found a leaked reservation and left it.
	EventLeakFound = "LeakFound"
	// EventSliceReturned (Normal), on the pool: a slice went back to the pool.
	EventSliceReturned = "SliceReturned"
	// EventInvalidIPAMConfig (Warning), on a NAD: its netpool IPAM config does not load; the note
	// names the path, the field and the value.
	EventInvalidIPAMConfig = "InvalidIPAMConfig"
	// EventPoolCreated (Normal), on a NAD: the pool of one of its inline ranges was created.
	EventPoolCreated = "PoolCreated"
	// EventPoolUnusable (Warning), on a NAD: the pool it references or derives cannot serve it
	// (missing, another range, or its namespaceSelector does not admit the NAD's namespace).
	EventPoolUnusable = "PoolUnusable"
)

// Event actions (events.k8s.io/v1 requires one).
const (
	actionRelease  = "Release"
	actionReturn   = "Return"
	actionValidate = "Validate"
	actionCreate   = "Create"
)

// Event reasons on IPPools (cluster-scoped, so their Events land in the default namespace).
const (
	// EventPoolExhausted (Warning): the pool's last free address was taken; ADDs from it fail with
	// code 100 until one is released. Recorded once each time the pool turns Exhausted.
	EventPoolExhausted = "PoolExhausted"
	// EventPoolDeletionBlocked (Warning): the pool was deleted while reservations name it; it
	// stays until they are released. Recorded once per deletion.
	EventPoolDeletionBlocked = "DeletionBlocked"
)

const actionStatus = "UpdateStatus"
