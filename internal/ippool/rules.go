package ippool

import (
	"time"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// Rules are the pool rules a config states and a derived pool records. Each is the pool's: a
// config that does not state it follows the pool, and one that states another value is refused
// (Resolve). A new rule is a field here and a rule in a file of its own (mode.go, cooldown.go,
// statefulsets.go), listed in poolRules; docs/adding-a-field.md has the other layers.
type Rules struct {
	// Overlapping is enable_overlapping_ranges (spec.overlappingRanges).
	Overlapping bool
	// Cooldown is reuseCooldown (0 for none).
	Cooldown time.Duration
	// Sticky is statefulSets: Sticky.
	Sticky bool
}

// rule is one pool rule: how a config states it, how a derived pool records it, and how a config
// is resolved against a pool.
type rule struct {
	// state sets the rule in r as config c states it.
	state func(c *ipam.Config, r *Rules)
	// record writes r's value of the rule on the spec of a derived pool.
	record func(r Rules, spec *ipamv1.IPPoolSpec)
	// resolve sets in r what config c draws from pool p with, and says why c disagrees with p, if
	// it does; r then holds what the caller still releases by (resolve's doc says what).
	resolve func(p *ipamv1.IPPool, c *ipam.Config, r *Rules) error
}

// poolRules are every pool rule, in the order Resolve reports disagreements.
var poolRules = []rule{overlappingRule, cooldownRule, stickyRule}

// RulesOf returns the pool rules config c states.
func RulesOf(c *ipam.Config) Rules {
	var r Rules
	for _, rule := range poolRules {
		rule.state(c, &r)
	}
	return r
}

// Resolve returns the rules that config c draws from pool p with, and the first rule c disagrees
// with. A config that disagrees may claim nothing from p, but still releases what it holds: the
// Rules then keep, for each rule, what such a release follows (ResolveOverlapping,
// ResolveCooldown, ResolveSticky).
func Resolve(p *ipamv1.IPPool, c *ipam.Config) (Rules, error) {
	var r Rules
	var first error
	for _, rule := range poolRules {
		if err := rule.resolve(p, c, &r); err != nil && first == nil {
			first = err
		}
	}
	return r, first
}
