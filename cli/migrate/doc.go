// Package migrate is netpoolctl migrate: it imports the allocations of a running whereabouts into
// netpool's pools and reservations, so that a whereabouts NAD switches to netpool by changing its
// IPAM "type" and no attachment's address moves.
//
// whereabouts' objects (group whereabouts.cni.cncf.io) are read as unstructured and decoded into
// small local types, so netpool does not depend on whereabouts' module. netpool's side is the one
// pool model (internal/ippool) and the node agent's own reservation (internal/reservation).
package migrate
