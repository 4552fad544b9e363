// Package egressrouter is the EgressRouter reconciler: NAD X, Pod X and Service X for each router
// X (children.go; the NAD's config is crds/network/v1/egressnad's one type), the router's mode
// (mode.go), the pod replaced delete-then-create, the router's address claimed in its spec.pool
// (pool.go), the checks an admission policy cannot make (admission.go), and the Available,
// Progressing and Degraded conditions (status.go). docs/egress-router.md is its design.
package egressrouter
