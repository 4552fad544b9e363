package ippool

import (
	"fmt"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// Sticky reports whether pool p gives each StatefulSet pod its ordinal's address
// (spec.statefulSets: Sticky).
func Sticky(p *ipamv1.IPPool) bool {
	return p.Spec.StatefulSets == ipamv1.StatefulSetsSticky
}

// stickyRule is statefulSets. A config that disagrees still releases by the pool's setting.
var stickyRule = rule{
	state: func(c *ipam.Config, r *Rules) { r.Sticky = c.Sticky() },
	record: func(r Rules, spec *ipamv1.IPPoolSpec) {
		if r.Sticky {
			spec.StatefulSets = ipamv1.StatefulSetsSticky
		}
	},
	resolve: func(p *ipamv1.IPPool, c *ipam.Config, r *Rules) error {
		sticky, err := ResolveSticky(p, c)
		r.Sticky = sticky
		return err
	},
}

// ResolveSticky returns whether config c draws from pool p with sticky StatefulSet addresses. It is
// the pool's setting, because the rule is about the pool's addresses: a config that does not state
// statefulSets follows the pool; one that states another value is refused, so that a NAD author
// who asks for sticky addresses never silently gets addresses that go with the pod (or the
// reverse). The pool's spec.statefulSets may be edited to settle it.
func ResolveSticky(p *ipamv1.IPPool, c *ipam.Config) (bool, error) {
	recorded := Sticky(p)
	if !c.StatefulSetsSet || c.Sticky() == recorded {
		return recorded, nil
	}
	return recorded, fmt.Errorf("statefulSets %s disagrees with IPPool %s, which records statefulSets %s: "+
		"every config of one pool must agree (or leave statefulSets out to follow the pool)",
		c.StatefulSets, p.Name, stickyText(recorded))
}

func stickyText(sticky bool) string {
	if sticky {
		return ipam.StatefulSetsSticky
	}
	return ipam.StatefulSetsNone
}
