package ippool

import (
	"fmt"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// Overlapping reports the mode recorded on p: true (an address is unique among every pool of the
// network) unless spec.overlappingRanges is Disabled. A pool made before the field existed counts
// as Enabled, whereabouts' default.
func Overlapping(p *ipamv1.IPPool) bool {
	return p.Spec.OverlappingRanges != ipamv1.OverlappingRangesDisabled
}

// overlappingRule is the overlapping-ranges mode. A config that disagrees keeps its own mode, so
// that it can still release what it claimed before the pool recorded one.
var overlappingRule = rule{
	state: func(c *ipam.Config, r *Rules) { r.Overlapping = c.EnableOverlappingRanges },
	record: func(r Rules, spec *ipamv1.IPPoolSpec) {
		if !r.Overlapping {
			spec.OverlappingRanges = ipamv1.OverlappingRangesDisabled
		}
	},
	resolve: func(p *ipamv1.IPPool, c *ipam.Config, r *Rules) error {
		recorded, err := ResolveOverlapping(p, c)
		if err != nil {
			recorded = c.EnableOverlappingRanges
		}
		r.Overlapping = recorded
		return err
	},
}

// ResolveOverlapping returns the enable_overlapping_ranges that config c draws from pool p with.
// Every config of one pool must use the pool's mode, because the mode names the reservation (the
// lock) of an address: two configs that disagree would each claim an address under its own name
// and hand it out twice. An inline config agrees or is refused, its default (true) included; a
// config that references p by name and does not set enable_overlapping_ranges follows p.
func ResolveOverlapping(p *ipamv1.IPPool, c *ipam.Config) (bool, error) {
	recorded := Overlapping(p)
	if c.Pool != "" && !c.OverlappingRangesSet {
		return recorded, nil
	}
	if c.EnableOverlappingRanges != recorded {
		stated := "true (the default)"
		if c.OverlappingRangesSet || !c.EnableOverlappingRanges {
			stated = fmt.Sprint(c.EnableOverlappingRanges)
		}
		return false, fmt.Errorf("enable_overlapping_ranges %s disagrees with IPPool %s, which records overlappingRanges %s "+
			"(enable_overlapping_ranges %t): every config of one pool must agree, or one address could be handed out twice",
			stated, p.Name, modeText(p), recorded)
	}
	return recorded, nil
}

// ReservationScope is the scope that names the reservations of pool poolName: the network when
// overlapping ranges are on (an address is unique among the network's pools), else the pool.
func ReservationScope(poolName, networkName string, overlapping bool) string {
	if overlapping {
		return networkName
	}
	return poolName
}

func modeText(p *ipamv1.IPPool) string {
	if Overlapping(p) {
		return string(ipamv1.OverlappingRangesEnabled)
	}
	return string(ipamv1.OverlappingRangesDisabled)
}
