package ippool

import (
	"math/big"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// Counts are what a pool's status says of its addresses: the pool status reconciler writes them,
// and `netpoolctl check` compares a written status with them, so both apply the one rule.
type Counts struct {
	// Capacity is how many addresses the pool can hand out; nil when its spec does not parse.
	Capacity *big.Int
	// Allocated is how many reservations the pool holds.
	Allocated int64
}

// CountsOf gives the counts of pool p holding allocated reservations. Overlapping peers change
// whether a pool may serve, never its counts, so none are needed.
func CountsOf(p *ipamv1.IPPool, allocated int64) Counts {
	c := Counts{Allocated: allocated}
	if parsed, err := Parse(p); err == nil {
		c.Capacity = parsed.Capacity()
	}
	return c
}

// Free is Capacity minus Allocated, never below zero (reservations may outnumber a capacity that an
// edit of the exclusions lowered); nil when Capacity is.
func (c Counts) Free() *big.Int {
	if c.Capacity == nil {
		return nil
	}
	f := new(big.Int).Sub(c.Capacity, big.NewInt(c.Allocated))
	if f.Sign() < 0 {
		f.SetInt64(0)
	}
	return f
}

// Status gives status.capacity, status.allocated and status.free as a pool's status holds them:
// capacity and free empty when the spec does not parse.
func (c Counts) Status() (capacity string, allocated int64, free string) {
	if c.Capacity == nil {
		return "", c.Allocated, ""
	}
	return c.Capacity.String(), c.Allocated, c.Free().String()
}
