package ipam

import (
	"cmp"
	"slices"
	"time"
)

// Bounds on what a network configuration may ask for. A NAD author writes the config, and the
// plugin, the node agent and the controller all load it, so every count, size and duration that
// costs them work, memory or waiting has a limit here. The README's configuration reference lists
// them; a config over a limit is CNI error 7.
const (
	// MaxRanges bounds range plus ipRanges. ADD hands out one address from every range, so more
	// than a handful is a mistake; the bound keeps a 1.5 MB NAD of ranges from costing each call
	// seconds of parsing.
	MaxRanges = 64
	// MinLockTimeout is the shortest bbolt.lock_timeout: below it no call could open the store and
	// commit, so every call would fail with 11 and the runtime would retry for ever.
	MinLockTimeout = 10 * time.Millisecond
	// MaxLockTimeout is the longest bbolt.lock_timeout. It also bounds how long the node agent works
	// on one call, so a NAD cannot hold the agent's goroutines for hours.
	MaxLockTimeout = 5 * time.Minute
	// MaxNetworkNameLen is the IPPool CRD's spec.networkName bound; both datastores accept the same
	// names, and the bbolt keys built from it stay far below bbolt's 32 KiB key limit.
	MaxNetworkNameLen = 253
	// MaxFlatConfigSize bounds the global flat file (configuration_path). The file has the fields of
	// one ipam section; a NAD itself is bounded by etcd's 1.5 MiB object limit.
	MaxFlatConfigSize = 1 << 20
)

// firstOverlap returns the indices (earlier, later, in config order) of two ranges whose subnets
// overlap, or ok false. Two prefixes overlap only when one contains the other, so after sorting by
// family and first address, a subnet overlaps an earlier one exactly when it starts at or before
// the highest last address seen so far: one sort and one sweep, O(n log n) instead of comparing
// every pair.
func firstOverlap(ranges []Range) (earlier, later int, ok bool) {
	order := make([]int, len(ranges))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		pa, pb := ranges[a].Subnet, ranges[b].Subnet
		return cmp.Or(cmp.Compare(pa.Addr().BitLen(), pb.Addr().BitLen()), pa.Addr().Compare(pb.Addr()), cmp.Compare(a, b))
	})
	reach := -1 // the range with the highest last address so far in the current family
	for _, i := range order {
		r := ranges[i].Subnet
		if reach >= 0 && ranges[reach].Subnet.Addr().BitLen() == r.Addr().BitLen() {
			if r.Addr().Compare(LastOf(ranges[reach].Subnet)) <= 0 {
				return min(i, reach), max(i, reach), true
			}
			if LastOf(r).Compare(LastOf(ranges[reach].Subnet)) <= 0 {
				continue
			}
		}
		reach = i
	}
	return 0, 0, false
}
