package podowner

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// NetworksAnnotation is the pod annotation in which Multus reads the pod's network selection
// elements (NAD specification v1.3, section 4.1.2.1).
const NetworksAnnotation = "k8s.v1.cni.cncf.io/networks"

// maxElements bounds the elements read from one annotation: the annotation is written by
// whoever creates the pod, and Multus itself attaches far fewer interfaces.
const maxElements = 64

// Element is the part of a network selection element netpool reads.
type Element struct {
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	Interface string   `json:"interface"`
	IPs       []string `json:"ips"`
	// ClaimRef is the IPAMClaim (in the pod's namespace) that owns this attachment's addresses
	// (specification section 4.1.2.1.11).
	ClaimRef string `json:"ipam-claim-reference"`
	// ClaimRefs is how many elements of the pod reference ClaimRef, this one included (set by
	// AttachmentElement): a claim without spec.interface may belong to one attachment only.
	ClaimRefs int `json:"-"`
}

// AttachmentElement finds, in a pod's networks annotation, the element of the attachment with
// interface ifName: the element that names it, or else the element Multus names net<N> by its
// 1-based position (Multus passes the interface name but neither the element nor its
// ipam-claim-reference to a delegate). Elements of the short form ("ns/name@if", comma
// separated) cannot carry a claim reference: found is then false. An annotation that is not one
// of the two forms is an error.
func AttachmentElement(annotation, ifName string) (Element, bool, error) {
	text := strings.TrimSpace(annotation)
	if text == "" || !strings.HasPrefix(text, "[") {
		return Element{}, false, nil
	}
	var els []Element
	if err := json.Unmarshal([]byte(text), &els); err != nil {
		return Element{}, false, fmt.Errorf("annotation %s is not a list of network selection elements: %w", NetworksAnnotation, err)
	}
	if len(els) > maxElements {
		return Element{}, false, fmt.Errorf("annotation %s has %d network selection elements, more than %d", NetworksAnnotation, len(els), maxElements)
	}
	var match *Element
	for i := range els {
		name := els[i].Interface
		if name == "" {
			name = fmt.Sprintf("net%d", i+1)
		}
		if name != ifName {
			continue
		}
		if match != nil {
			return Element{}, false, fmt.Errorf("annotation %s has two network selection elements for interface %s", NetworksAnnotation, ifName)
		}
		match = &els[i]
	}
	if match == nil {
		return Element{}, false, nil
	}
	if match.ClaimRef != "" {
		for i := range els {
			if els[i].ClaimRef == match.ClaimRef {
				match.ClaimRefs++
			}
		}
	}
	return *match, true, nil
}

// ReferencesClaim reports whether a network selection element of pod references the IPAMClaim
// claim of the pod's namespace: the pod is one of the claim's (a VM's launcher pod).
func ReferencesClaim(pod *corev1.Pod, claim string) bool {
	text := strings.TrimSpace(pod.Annotations[NetworksAnnotation])
	if !strings.HasPrefix(text, "[") {
		return false
	}
	var els []Element
	if json.Unmarshal([]byte(text), &els) != nil || len(els) > maxElements {
		return false
	}
	for _, el := range els {
		if el.ClaimRef == claim {
			return true
		}
	}
	return false
}
