package ippool

import (
	"fmt"
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// Derive returns the IPPool that inline range r of a config with networkName and the pool rules
// rules describes: named ipamv1.PoolName(networkName, subnet), labelled DerivedLabel, with the
// range's window, exclusions (as the fewest CIDRs), gateway and pool rules.
// rangeStart and rangeEnd are set only where the config narrows the subnet. The agent and the
// controller both create derived pools with it, so whichever comes first, the pool is the same.
// The window, exclusions and gateway are the first config's; configs sharing the pool may narrow
// it further, as in whereabouts.
func Derive(networkName string, r ipam.Range, rules Rules) (*ipamv1.IPPool, error) {
	if !r.Subnet.IsValid() || !r.Start.IsValid() || !r.End.IsValid() {
		return nil, fmt.Errorf("range %q is not a valid subnet", r.Subnet)
	}
	p := &ipamv1.IPPool{
		ObjectMeta: metav1.ObjectMeta{
			Name:   DerivedName(networkName, r.Subnet),
			Labels: map[string]string{ipamv1.DerivedLabel: ipamv1.DerivedLabelValue},
		},
		Spec: ipamv1.IPPoolSpec{Range: r.Subnet.String(), NetworkName: networkName, Exclude: r.ExcludedCIDRs()},
	}
	first, last := ipam.UsableBounds(r.Subnet)
	if r.Start != first {
		p.Spec.RangeStart = r.Start.String()
	}
	if r.End != last {
		p.Spec.RangeEnd = r.End.String()
	}
	if r.Gateway.IsValid() {
		p.Spec.Gateway = r.Gateway.String()
	}
	for _, rule := range poolRules {
		rule.record(rules, &p.Spec)
	}
	return p, nil
}

// DerivedName is the name of the pool derived from an inline range of subnet in network
// networkName: ipamv1.PoolName, whereabouts' naming.
func DerivedName(networkName string, subnet netip.Prefix) string {
	return ipamv1.PoolName(networkName, subnet)
}

// IsDerived reports whether p was derived from a NAD's inline range rather than made by an operator.
func IsDerived(p *ipamv1.IPPool) bool {
	return p.Labels[ipamv1.DerivedLabel] == ipamv1.DerivedLabelValue
}

// CheckDerivedFor checks that p, found under the name Derive gives range r of network networkName,
// is that range's pool: an existing object of the name must have the same range and network.
func CheckDerivedFor(p *ipamv1.IPPool, networkName string, r ipam.Range) error {
	if p.Spec.Range != r.Subnet.String() || p.Spec.NetworkName != networkName {
		return fmt.Errorf("IPPool %s already exists for range %s of network %q, not range %s of network %q",
			p.Name, p.Spec.Range, p.Spec.NetworkName, r.Subnet, networkName)
	}
	return nil
}

// CheckReference checks that a config with networkName may reference pool p by name: a config
// that states a network_name must state the pool's.
func CheckReference(p *ipamv1.IPPool, networkName string) error {
	if networkName != "" && networkName != p.Spec.NetworkName {
		return fmt.Errorf("network_name %q: differs from the networkName %q of IPPool %s", networkName, p.Spec.NetworkName, p.Name)
	}
	return nil
}
