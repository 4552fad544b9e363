package controller

import ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"

// StatusCounts returns the counts the pool status reconciler writes for pool p when it holds
// allocated reservations: status.capacity, status.allocated and status.free, capacity and free
// empty when the spec does not parse. It is the reconciler's own arithmetic, exported so that
// `netpoolctl check` tests the written status against the one rule rather than a second copy.
func StatusCounts(p *ipamv1.IPPool, allocated int64) (capacity string, alloc int64, free string) {
	var s ipamv1.IPPool
	// Overlapping peers change only the Invalid condition, never the counts: none are needed.
	setCounts(&s, judgePool(p, nil, allocated))
	return s.Status.Capacity, *s.Status.Allocated, s.Status.Free
}
