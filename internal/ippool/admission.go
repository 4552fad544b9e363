package ippool

import (
	"errors"
	"fmt"
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// Subject is who asks for an address: the pod's namespace and node, with their labels. An empty
// Node skips the nodeSelector (the controller judges a NAD, which runs on any node).
type Subject struct {
	Namespace       string
	NamespaceLabels map[string]string
	Node            string
	NodeLabels      map[string]string
}

// AdmitsNamespace checks p's namespaceSelector against the labels of namespace. The error names
// the pool, the namespace and the selector.
func AdmitsNamespace(p *ipamv1.IPPool, namespace string, nsLabels map[string]string) error {
	if p.Spec.NamespaceSelector == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.NamespaceSelector)
	if err != nil {
		return fmt.Errorf("IPPool %s has an invalid namespaceSelector: %w", p.Name, err)
	}
	if !sel.Matches(labels.Set(nsLabels)) {
		return fmt.Errorf("IPPool %s does not admit namespace %s: its namespaceSelector is %q", p.Name, namespace, sel)
	}
	return nil
}

// AdmitsNode checks p's nodeSelector against the labels of node.
func AdmitsNode(p *ipamv1.IPPool, node string, nodeLabels map[string]string) error {
	if p.Spec.NodeSelector == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector)
	if err != nil {
		return fmt.Errorf("IPPool %s has an invalid nodeSelector: %w", p.Name, err)
	}
	if !sel.Matches(labels.Set(nodeLabels)) {
		return fmt.Errorf("IPPool %s does not admit node %s: its nodeSelector is %q", p.Name, node, sel)
	}
	return nil
}

// Governing returns the pools whose selectors an allocation from p must obey: p itself, then every
// peer of p's address space (the same networkName and family) whose window shares an address with
// p's, in the order given. An inline pool that overlaps an operator's pool thus admits only whom
// the operator's pool admits, so a NAD cannot reach addresses its namespace was not given. Peers
// whose spec does not parse, and peers being deleted, govern nothing.
func Governing(p *Pool, peers []ipamv1.IPPool) []*Pool {
	out := []*Pool{p}
	for i := range peers {
		q := &peers[i]
		if q.Name == p.Name() || q.DeletionTimestamp != nil || q.Spec.NetworkName != p.NetworkName() {
			continue
		}
		// Most peers of a network lie elsewhere: their subnet alone says so, without parsing the
		// whole spec (this runs on every ADD, over every pool of the network).
		if sub, err := netip.ParsePrefix(q.Spec.Range); err == nil && !sub.Masked().Overlaps(p.Range.Subnet) {
			continue
		}
		qp, err := Parse(q)
		if err != nil || !p.Overlaps(qp) {
			continue
		}
		out = append(out, qp)
	}
	return out
}

// SelectsNamespaces reports whether any of pools has a namespaceSelector, so the caller knows it
// must find the namespace's labels.
func SelectsNamespaces(pools []*Pool) bool {
	for _, p := range pools {
		if p.Object.Spec.NamespaceSelector != nil {
			return true
		}
	}
	return false
}

// SelectsNodes reports whether any of pools has a nodeSelector.
func SelectsNodes(pools []*Pool) bool {
	for _, p := range pools {
		if p.Object.Spec.NodeSelector != nil {
			return true
		}
	}
	return false
}

// Admit checks s against the selectors of every pool in pools (see Governing). The error of a
// pool other than the first says that the first overlaps it.
func Admit(pools []*Pool, s Subject) error {
	var errs []error
	for i, p := range pools {
		err := AdmitsNamespace(p.Object, s.Namespace, s.NamespaceLabels)
		if err == nil && s.Node != "" {
			err = AdmitsNode(p.Object, s.Node, s.NodeLabels)
		}
		if err == nil {
			continue
		}
		if i > 0 {
			err = fmt.Errorf("IPPool %s overlaps IPPool %s (%s-%s), whose rules apply to its addresses too: %w",
				pools[0].Name(), p.Name(), p.Range.Start, p.Range.End, err)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
