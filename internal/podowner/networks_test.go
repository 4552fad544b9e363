package podowner

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAttachmentElement(t *testing.T) {
	tests := []struct {
		name       string
		annotation string
		ifName     string
		wantFound  bool
		wantClaim  string
		wantNAD    string
		wantErr    string
	}{
		{name: "no annotation", ifName: "net1"},
		{name: "short form carries no claim", annotation: "default/vm-net@net1, other", ifName: "net1"},
		{name: "by interface", ifName: "pod16367aacb67",
			annotation: `[{"name":"a","interface":"eth9"},{"name":"vm-net","namespace":"vms","interface":"pod16367aacb67","ipam-claim-reference":"vm-a.pod16367aacb67"}]`,
			wantFound:  true, wantClaim: "vm-a.pod16367aacb67", wantNAD: "vm-net"},
		{name: "by Multus' default name", ifName: "net2",
			annotation: `[{"name":"a"},{"name":"b","ipam-claim-reference":"c"}]`, wantFound: true, wantClaim: "c", wantNAD: "b"},
		{name: "an element without a claim", ifName: "net1", annotation: `[{"name":"a"}]`, wantFound: true, wantNAD: "a"},
		{name: "no element of this interface", ifName: "net3", annotation: `[{"name":"a"},{"name":"b","interface":"net3x"}]`},
		{name: "two elements of one interface", ifName: "net1", annotation: `[{"name":"a"},{"name":"b","interface":"net1"}]`,
			wantErr: "two network selection elements for interface net1"},
		{name: "not JSON", ifName: "net1", annotation: `[{"name":`, wantErr: "is not a list of network selection elements"},
		{name: "a claim reference of the wrong type", ifName: "net1", annotation: `[{"name":"a","ipam-claim-reference":7}]`,
			wantErr: "is not a list of network selection elements"},
		{name: "too many elements", ifName: "net1", annotation: "[" + strings.Repeat(`{"name":"a"},`, maxElements) + `{"name":"a"}]`,
			wantErr: "more than 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			el, found, err := AttachmentElement(tt.annotation, tt.ifName)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if found != tt.wantFound || el.ClaimRef != tt.wantClaim || el.Name != tt.wantNAD {
				t.Fatalf("found %v element %+v, want found %v, claim %q, NAD %q", found, el, tt.wantFound, tt.wantClaim, tt.wantNAD)
			}
		})
	}
}

// FuzzAttachmentElement checks that any annotation is either read or refused with an error, never
// a panic, and that what is found is the interface asked for.
func FuzzAttachmentElement(f *testing.F) {
	for _, seed := range []string{
		`[{"name":"vm-net","interface":"net1","ipam-claim-reference":"vm-a.net1"}]`,
		`[{"name":"a"},{"name":"b","ipam-claim-reference":"c"}]`,
		`default/a@net1,b`, `[`, `[]`, `[null]`, `[{"interface":""}]`, `{"name":"a"}`,
	} {
		f.Add(seed, "net1")
	}
	f.Fuzz(func(t *testing.T, annotation, ifName string) {
		el, found, err := AttachmentElement(annotation, ifName)
		if err != nil && found {
			t.Fatalf("found an element and an error %v", err)
		}
		if found && el.Interface != "" && el.Interface != ifName {
			t.Fatalf("element of interface %q returned for %q", el.Interface, ifName)
		}
		// The controller's reading of the same annotation (is the pod one of the claim's?) agrees.
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{NetworksAnnotation: annotation}}}
		if found && el.ClaimRef != "" && !ReferencesClaim(pod, el.ClaimRef) {
			t.Fatalf("element references claim %q, which ReferencesClaim does not see", el.ClaimRef)
		}
	})
}

// TestAttachmentElementCountsClaimReferences: a claim without spec.interface belongs to one
// attachment, so the element found says how many elements of the pod reference its claim.
func TestAttachmentElementCountsClaimReferences(t *testing.T) {
	for _, tt := range []struct {
		annotation string
		want       int
	}{
		{`[{"name":"vm-net","ipam-claim-reference":"vm1.anet"}]`, 1},
		{`[{"name":"vm-net","ipam-claim-reference":"vm1.anet"},{"name":"other","ipam-claim-reference":"vm1.bnet"}]`, 1},
		{`[{"name":"vm-net","ipam-claim-reference":"vm1.anet"},{"name":"vm-net","interface":"net7","ipam-claim-reference":"vm1.anet"}]`, 2},
		{`[{"name":"vm-net"}]`, 0},
	} {
		el, found, err := AttachmentElement(tt.annotation, "net1")
		if err != nil || !found || el.ClaimRefs != tt.want {
			t.Errorf("%s: element %+v found %v, %v; want %d references of its claim", tt.annotation, el, found, err, tt.want)
		}
	}
}
