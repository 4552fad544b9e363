// Package gc is the leak GC reconciler: it releases a reservation whose pod is gone, was replaced
// by a pod of the same name, has finished, or no longer lists the address in its network-status,
// and a persistently owned one whose owner has ended once no pod is bound to it, after a grace
// period (the policy is internal/gcpolicy's). Pod, StatefulSet and IPAMClaim events drive it
// (owners.go, predicates.go); a periodic sweep catches the rest (sweep.go).
package gc
