// Package slice is the slice return reconciler: a node's slice that has stayed empty past a grace
// period goes back to its pool.
package slice
