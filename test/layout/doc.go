// Package layout tests the layout's one-way dependencies (README "Layout"): who may import whom.
// The rules are what keeps the hot path and the admin tool cheap and the models shared: the CNI
// plugins link no Kubernetes client, the address logic imports nothing of the project, the shared
// models (pool model, GC policy, reservation, scheme) import no daemon, netpoolctl links no daemon's
// implementation (no controller, no node agent or its store, no controller-runtime manager), and
// no reconciler imports another.
package layout
