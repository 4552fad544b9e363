package ippool

import (
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// Resolve returns the rules that config c draws from pool p with: the pool's overlapping-ranges
// mode, reuse cool-down and statefulSets mode (ResolveOverlapping, ResolveCooldown, ResolveSticky).
// The error is the first rule c disagrees with, and the Rules are then zero: a caller that must
// still release by a disagreeing config (kubestore's Bind) resolves each rule itself.
func Resolve(p *ipamv1.IPPool, c *ipam.Config) (Rules, error) {
	overlap, errOverlap := ResolveOverlapping(p, c)
	cooldown, errCooldown := ResolveCooldown(p, c)
	sticky, errSticky := ResolveSticky(p, c)
	for _, err := range []error{errOverlap, errCooldown, errSticky} {
		if err != nil {
			return Rules{}, err
		}
	}
	return Rules{Overlapping: overlap, Cooldown: cooldown, Sticky: sticky}, nil
}
