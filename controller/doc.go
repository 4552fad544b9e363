// Package controller holds netpool's IPAM controller: the controller-runtime manager that
// cmd/netpool-controller runs, and its reconcilers.
//
//   - Pool status (poolstatus_*.go): capacity, allocated and free of every IPPool, counted from the
//     reservations as they come and go (no list per reconcile), and the Ready, Exhausted and Invalid
//     conditions; a Warning Event when a pool turns Exhausted; the finalizer that holds a deleted
//     pool until no reservation names it (poolstatus_deletion.go).
//   - Leak GC (gc_*.go): releases a reservation whose pod is gone, was replaced by a pod of the same
//     name, has finished, or no longer lists the address in its network-status, once the reservation
//     is older than a grace period. Pod events drive it; a periodic sweep catches the rest.
//   - NADs (nad_*.go): parses every NetworkAttachmentDefinition with netpool IPAM with the plugin's
//     own parser, creates the pools of inline ranges, checks references to operator-made pools, and
//     reports bad configs as Warning Events on the NAD. It starts once the NAD CRD is served
//     (nad_gate.go); until then the controller runs without it and is not ready.
//   - Nodes and slices (node_*.go, slice_*.go): reclaims the reservations and slices of a deleted
//     node, and gives back slices that stay empty past a grace period.
//   - EgressRouters (egressrouter_*.go): NAD X, Pod X and Service X for each router X, the pod
//     replaced delete-then-create, the router's address claimed in its spec.pool, and the
//     Available, Progressing and Degraded conditions; docs/egress-router.md.
//
// Every reconciler runs only in the elected leader. Releases are Events and metrics; docs/controller.md
// lists the flags, the metrics and the GC policy.
package controller
