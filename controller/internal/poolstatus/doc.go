// Package poolstatus is the pool status reconciler: capacity, allocated and free of every IPPool,
// counted from the reservations as they come and go (tally.go: no list per reconcile), the Ready,
// Exhausted and Invalid conditions (conditions.go, verdict.go), a Warning Event when a pool turns
// Exhausted (events.go), and the finalizer that holds a deleted pool until no reservation names it
// (deletion.go).
package poolstatus
