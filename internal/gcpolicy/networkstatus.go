package gcpolicy

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
)

// NetworkStatusAddrs returns the addresses Multus reported for the pod in its
// k8s.v1.cni.cncf.io/network-status annotation (every attachment, every interface), and whether
// the pod has the annotation at all. Without it nothing can be concluded: Multus has not written
// it yet, or does not write it at all. A value that is not the annotation's JSON is an error.
func NetworkStatusAddrs(pod *corev1.Pod) ([]netip.Addr, bool, error) {
	raw, ok := pod.Annotations[nadv1.NetworkStatusAnnot]
	if !ok {
		return nil, false, nil
	}
	var statuses []nadv1.NetworkStatus
	if err := json.Unmarshal([]byte(raw), &statuses); err != nil {
		return nil, true, fmt.Errorf("annotation %s of pod %s/%s is not a list of network statuses: %w",
			nadv1.NetworkStatusAnnot, pod.Namespace, pod.Name, err)
	}
	var addrs []netip.Addr
	for _, s := range statuses {
		for _, text := range s.IPs {
			// Multus writes bare addresses; a prefix length is tolerated.
			text, _, _ = strings.Cut(strings.TrimSpace(text), "/")
			if a, err := netip.ParseAddr(text); err == nil {
				addrs = append(addrs, a.WithZone("").Unmap())
			}
		}
	}
	return addrs, true, nil
}
