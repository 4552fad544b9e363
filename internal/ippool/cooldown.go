package ippool

import (
	"fmt"
	"time"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// Cooldown returns the reuse cool-down recorded on p (0 when unset). The CRD's CEL rules admit
// only what ipam.ParseReuseCooldown accepts, so an error means an object the API server did not
// check (a test's, or one stored before the field had rules).
func Cooldown(p *ipamv1.IPPool) (time.Duration, error) {
	if p.Spec.ReuseCooldown == "" {
		return 0, nil
	}
	d, err := ipam.ParseReuseCooldown("spec.reuseCooldown", p.Spec.ReuseCooldown)
	if err != nil {
		return 0, fmt.Errorf("IPPool %s: %w", p.Name, err)
	}
	return d, nil
}

// cooldownRule is the reuse cool-down. A config that disagrees still cools its releases by the
// pool's.
var cooldownRule = rule{
	state: func(c *ipam.Config, r *Rules) { r.Cooldown = c.ReuseCooldown },
	record: func(r Rules, spec *ipamv1.IPPoolSpec) {
		if r.Cooldown > 0 {
			spec.ReuseCooldown = r.Cooldown.String()
		}
	},
	resolve: func(p *ipamv1.IPPool, c *ipam.Config, r *Rules) error {
		cooldown, err := ResolveCooldown(p, c)
		r.Cooldown = cooldown
		return err
	},
}

// ResolveCooldown returns the reuse cool-down that config c draws from pool p with. The cool-down
// is the pool's, because what cools is the pool's address, whichever config released it: a config
// that does not state reuseCooldown follows the pool; one that states another value is refused,
// so that a NAD author who asks for a cool-down never silently gets a shorter one (or none). Unlike
// the overlapping-ranges mode, disagreeing here could not hand an address out twice; the refusal
// is for predictability, and the pool's spec.reuseCooldown may be edited to settle it.
func ResolveCooldown(p *ipamv1.IPPool, c *ipam.Config) (time.Duration, error) {
	recorded, err := Cooldown(p)
	if err != nil {
		return 0, err
	}
	if !c.ReuseCooldownSet || c.ReuseCooldown == recorded {
		return recorded, nil
	}
	return recorded, fmt.Errorf("reuseCooldown %v disagrees with IPPool %s, which records reuseCooldown %s: "+
		"every config of one pool must agree (or leave reuseCooldown out to follow the pool)",
		c.ReuseCooldown, p.Name, cooldownText(recorded))
}

func cooldownText(d time.Duration) string {
	if d == 0 {
		return "0s (none)"
	}
	return d.String()
}
