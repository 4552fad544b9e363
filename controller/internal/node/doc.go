// Package node is the node reclaim reconciler: the reservations and slices of a deleted node are
// released and given back to their pools.
package node
