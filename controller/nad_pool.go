package controller

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// maxExclude is the IPPool API's limit on spec.exclude entries.
const maxExclude = 256

// derivedPool is the IPPool that an inline (whereabouts-style) range r of a config describes,
// named PoolName(network_name, subnet): the same object the node agent creates on first use, so
// whichever of the two comes first, the pool is the same. rangeStart and rangeEnd are set only
// when the config narrows the subnet; exclusions are written as the fewest CIDRs.
func derivedPool(name, networkName string, r ipam.Range) (*ipamv1.IPPool, error) {
	p := &ipamv1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       ipamv1.IPPoolSpec{Range: r.Subnet.String(), NetworkName: networkName},
	}
	if !r.Subnet.IsValid() {
		return nil, fmt.Errorf("range %q is not a valid subnet", r.Subnet)
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
	for _, iv := range r.Excluded {
		if iv.First == r.Gateway && iv.Last == r.Gateway {
			continue // the gateway is excluded by spec.gateway
		}
		p.Spec.Exclude = append(p.Spec.Exclude, iv.CIDRStrings()...)
	}
	if len(p.Spec.Exclude) > maxExclude {
		return nil, fmt.Errorf("range %s: its exclusions make %d CIDRs, more than the %d an IPPool holds",
			r.Subnet, len(p.Spec.Exclude), maxExclude)
	}
	return p, nil
}

// admits checks a pool's namespaceSelector against the labels of a namespace. The error names the
// pool, the namespace and the selector.
func admits(pool *ipamv1.IPPool, namespace string, nsLabels map[string]string) error {
	if pool.Spec.NamespaceSelector == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(pool.Spec.NamespaceSelector)
	if err != nil {
		return fmt.Errorf("IPPool %s has an invalid namespaceSelector: %w", pool.Name, err)
	}
	if !sel.Matches(labels.Set(nsLabels)) {
		return fmt.Errorf("IPPool %s does not admit namespace %s: its namespaceSelector is %q", pool.Name, namespace, sel)
	}
	return nil
}
