package ipam

// setAllowPersistentIPs reads allowPersistentIPs from the network config's top level (top), where
// OVN-Kubernetes and KubeVirt's ipam-extensions read it, and from the ipam section (inIPAM), where
// netpool first documented it. Either one opts the network in. The two may not disagree: with the
// flag only inside ipam, ipam-extensions never creates a claim and a VM silently gets a new address
// on each start, so a config that states it false at the top and true inside ipam (or the reverse)
// is refused rather than half honoured.
func (c *Config) setAllowPersistentIPs(top, inIPAM *bool) error {
	if top != nil && inIPAM != nil && *top != *inIPAM {
		return configErr("allowPersistentIPs", "", "is %t at the network config's top level but %t in its ipam section: "+
			"state it once, at the top level, where KubeVirt's ipam-extensions reads it", *top, *inIPAM)
	}
	on := (top != nil && *top) || (inIPAM != nil && *inIPAM)
	if !on {
		return nil
	}
	if c.Datastore != DatastoreKubernetes {
		return configErr("allowPersistentIPs", "true", "needs datastore %q: IPAMClaims live in the Kubernetes API", DatastoreKubernetes)
	}
	c.AllowPersistentIPs = true
	return nil
}
