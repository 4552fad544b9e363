package ippool

import (
	"fmt"

	"github.com/netpool/netpool/ipam"
)

// MaxExclude is the limit on the exclusions of one range, as CIDRs: ipam.MaxExclude, which
// ipam.ParseRange enforces for configs and pools alike, and the IPPool API's MaxItems on
// spec.exclude.
const MaxExclude = ipam.MaxExclude

// MaxDerivedPools is the most pools one NAD (all its netpool sections together) or one config may
// derive from inline ranges. Every derived pool is a cluster-scoped object that a namespace's
// author makes the controller and the agents create, so their number is bounded; dual stack needs
// two, and whereabouts' ipRanges rarely name more than a handful.
const MaxDerivedPools = 16

// CheckDerivedCount refuses n derived pools when n is over MaxDerivedPools.
func CheckDerivedCount(n int) error {
	if n > MaxDerivedPools {
		return fmt.Errorf("%d inline ranges would derive as many IPPools; one NAD may derive at most %d", n, MaxDerivedPools)
	}
	return nil
}
