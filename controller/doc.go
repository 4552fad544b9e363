// Package controller holds netpool's IPAM controller: the controller-runtime manager that
// cmd/netpool-controller runs (manager.go), its options and flags (options.go), its logging
// (logging.go) and the registration of its metrics. Each reconciler is a package of its own under
// controller/internal, which no other reconciler imports, so a change to one compiles and tests
// that one:
//
//   - poolstatus: capacity, allocated and free of every IPPool, its conditions, and the finalizer
//     that holds a deleted pool until no reservation names it.
//   - gc: releases leaked reservations (the policy is internal/gcpolicy's, which netpoolctl shares).
//   - nad and derivedpool: pools from NADs' inline ranges, checked references, Warning Events on bad
//     configs, and the removal of derived pools no NAD uses; both start once the NAD CRD is served.
//   - node and slice: reclaim a deleted node's reservations and slices, and give back slices that
//     stay empty past a grace period.
//   - egressrouter: NAD X, Pod X and Service X for each EgressRouter X; docs/egress-router.md.
//
// They share the cache's field indexes (index), the slim informer cache (slim), the release path
// with its Events and metrics (release, recorder, metrics), the event filters (predicates) and the
// clock (clock); ctrltest is their test support. Every reconciler runs only in the elected leader.
// docs/controller.md lists the flags, the metrics and the GC policy.
package controller
