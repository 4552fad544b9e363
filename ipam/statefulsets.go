package ipam

// StatefulSets modes: what a pool does for the pods of a StatefulSet (statefulSets). The values
// are the IPPool's spec.statefulSets.
const (
	// StatefulSetsNone: a StatefulSet's pod owns its address like any pod.
	StatefulSetsNone = "None"
	// StatefulSetsSticky: the address belongs to the pod's identity (namespace, StatefulSet,
	// ordinal, interface); in the embedded store, to the pod's name when it ends in -<ordinal>.
	StatefulSetsSticky = "Sticky"
)

// setStatefulSets applies statefulSets. Unset, it is None for an inline range and the IPPool's
// for a pool referenced by name (StatefulSetsSet tells the two apart).
func (c *Config) setStatefulSets(w *wireIPAM) error {
	if w.StatefulSets == nil {
		c.StatefulSets = StatefulSetsNone
		return nil
	}
	switch v := *w.StatefulSets; v {
	case StatefulSetsSticky, StatefulSetsNone:
		c.StatefulSets, c.StatefulSetsSet = v, true
		return nil
	default:
		if len(v) > 16 {
			v = v[:16] + "..."
		}
		return configErr("statefulSets", v, "want %q (a StatefulSet pod keeps its address by ordinal) or %q", StatefulSetsSticky, StatefulSetsNone)
	}
}

// Sticky reports whether the config gives StatefulSet pods their ordinal's address.
func (c *Config) Sticky() bool { return c.StatefulSets == StatefulSetsSticky }
