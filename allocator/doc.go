// Package allocator is netpool's allocation engine. It turns a validated ipam.Config and an
// attachment into addresses, one per range, over a Store that makes each claim atomic.
//
// The engine owns the rules that do not depend on where state lives: idempotent ADD per
// (containerID, ifName), requested addresses, overlapping-range scopes, GC by valid attachments,
// and exhaustion for STATUS. Stores own how a claim is made atomic: one bbolt read-write
// transaction (package boltstore), or one Create of a reservation object (Kubernetes).
package allocator
