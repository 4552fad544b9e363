// Package ippool is the one model of an IPPool: the rules that the node agent's store
// (allocator/kubestore), the controller and the admin CLI all apply, so that none of them keeps a
// copy that could drift from the others.
//
// It holds:
//   - the mapping between a config's range and an IPPool spec, both ways (Derive, Parse), and the
//     naming of derived pools (Derive names them ipamv1.PoolName and labels them DerivedLabel);
//   - the admission rules: a pool's namespaceSelector and nodeSelector, applied to the pool and to
//     every pool of the same address space whose window overlaps it (Admit);
//   - the overlapping-ranges mode recorded on a pool, and how a config must agree with it (Scope);
//   - the controller's verdict as the agent obeys it (Serving) and the overlap rule behind it
//     (OverlapText);
//   - the limits: exclusions per range (MaxExclude, enforced by ipam.ParseRange for configs and
//     pools alike) and derived pools per NAD (MaxDerivedPools);
//   - what one address is to a pool (Classify), for tools that explain an address;
//   - the addresses that nodes record as cooling on their slices under the pool's reuse
//     cool-down (CoolingIn), and the form a node writes them in (SliceCooling).
//
// The package is pure: it reads the API types and does no I/O, so a caller brings the pool, its
// peers and the labels of the namespace and node, from a cache or from the API server.
package ippool
