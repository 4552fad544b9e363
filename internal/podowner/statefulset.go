package podowner

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// PodIndexLabel is the label the StatefulSet controller puts on each pod with its ordinal
// (Kubernetes 1.28 and later).
const PodIndexLabel = "apps.kubernetes.io/pod-index"

// StatefulSet returns the sticky owner of interface ifName of pod: the StatefulSet that
// controls it (its controller ownerReference of kind StatefulSet, apps/v1), with the pod's ordinal
// and ifName. The ordinal is the one in the pod's name, which must be <statefulset>-<ordinal> as
// the StatefulSet controller names its pods, and the PodIndexLabel, when the pod has it, must say
// the same: whoever may create pods can write an ownerReference and a label, but the name is the
// identity (two pods of one name cannot coexist), so a pod named otherwise never gets an ordinal's
// address. A pod that no StatefulSet controls has none (nil). A StatefulSet pod whose ordinal
// cannot be told, or is told two ways, is an error: giving it an address of its own would silently
// lose the rule.
func StatefulSet(pod *corev1.Pod, ifName string) (*ipamv1.ReservationOwner, error) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "StatefulSet" || ref.APIVersion != "apps/v1" {
		return nil, nil
	}
	text, ok := strings.CutPrefix(pod.Name, ref.Name+"-")
	if !ok {
		return nil, fmt.Errorf("pod %s/%s of StatefulSet %s: its name is not %s-<ordinal>, as the StatefulSet's own pods are named",
			pod.Namespace, pod.Name, ref.Name, ref.Name)
	}
	ordinal, ok := ipam.ParseOrdinal(text)
	if !ok {
		return nil, fmt.Errorf("pod %s/%s of StatefulSet %s: ordinal %q (from its name) is not a number from 0 to 2147483647 without leading zeros",
			pod.Namespace, pod.Name, ref.Name, Truncate(text, 16))
	}
	if label, labelled := pod.Labels[PodIndexLabel]; labelled && label != text {
		return nil, fmt.Errorf("pod %s/%s of StatefulSet %s: its label %s=%q disagrees with the ordinal %d of its name",
			pod.Namespace, pod.Name, ref.Name, PodIndexLabel, Truncate(label, 16), ordinal)
	}
	return &ipamv1.ReservationOwner{Kind: ipamv1.OwnerStatefulSet, Namespace: pod.Namespace, Name: ref.Name,
		Ordinal: &ordinal, Interface: ifName}, nil
}

// Truncate cuts s, text a pod's author wrote (a label, a name, a claim reference), to n bytes
// for an error message, marking the cut.
func Truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
