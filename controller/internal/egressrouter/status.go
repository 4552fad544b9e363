package egressrouter

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	networkv1 "github.com/netpool/netpool/crds/network/v1"
)

// egressObservation is what one reconcile found, from which the conditions follow.
type egressObservation struct {
	// problem is why the spec cannot be reached (Degraded), or nil.
	problem *egressProblem
	// replacing is set while a pod of an older config (or a failed one) is being deleted.
	replacing bool
	// podFailed is set when the current pod failed and is being replaced.
	podFailed bool
	// pod is the pod of the current config, nil when there is none (yet).
	pod *corev1.Pod
	// addresses are the router's addresses in use.
	addresses []networkv1.EgressRouterAddress
}

// setEgressConditions sets Available, Progressing and Degraded on r from obs, at r's generation,
// in the order egressConditionOrder.
// A Degraded PodFailed stays until the replacement pod is Available, so the failure is visible
// for longer than the instant the failed pod is deleted.
func setEgressConditions(r *networkv1.EgressRouter, obs egressObservation) {
	gen := r.Generation
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&r.Status.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen,
		})
	}
	availableMsg := ""
	available := false
	switch {
	case obs.problem != nil && obs.pod == nil:
		set(networkv1.EgressRouterAvailable, metav1.ConditionFalse, obs.problem.reason, obs.problem.message)
	case obs.pod == nil:
		set(networkv1.EgressRouterAvailable, metav1.ConditionFalse, networkv1.ReasonPodNotReady, fmt.Sprintf("pod %s does not exist yet", r.Name))
	case !podReady(obs.pod):
		set(networkv1.EgressRouterAvailable, metav1.ConditionFalse, networkv1.ReasonPodNotReady, fmt.Sprintf("pod %s is not Ready", r.Name))
	default:
		if availableMsg = attachedMessage(obs.pod, r, obs.addresses); availableMsg != "" {
			set(networkv1.EgressRouterAvailable, metav1.ConditionFalse, networkv1.ReasonAddressNotAttached, availableMsg)
		} else {
			available = true
			set(networkv1.EgressRouterAvailable, metav1.ConditionTrue, networkv1.ReasonRouterReady,
				fmt.Sprintf("pod %s is Ready with %s on %s", r.Name, addressList(obs.addresses), egressInterface))
		}
	}
	switch {
	case obs.replacing:
		set(networkv1.EgressRouterProgressing, metav1.ConditionTrue, networkv1.ReasonReplacingPod,
			fmt.Sprintf("deleting pod %s; its successor is created once it is gone", r.Name))
	case obs.problem != nil:
		set(networkv1.EgressRouterProgressing, metav1.ConditionFalse, obs.problem.reason, "the spec cannot be reached: see Degraded")
	case !available:
		set(networkv1.EgressRouterProgressing, metav1.ConditionTrue, networkv1.ReasonCreatingPod,
			fmt.Sprintf("waiting for pod %s to be Ready with its addresses", r.Name))
	default:
		set(networkv1.EgressRouterProgressing, metav1.ConditionFalse, networkv1.ReasonAsExpected, "the router runs its current config")
	}
	prev := meta.FindStatusCondition(r.Status.Conditions, networkv1.EgressRouterDegraded)
	switch {
	case obs.problem != nil:
		set(networkv1.EgressRouterDegraded, metav1.ConditionTrue, obs.problem.reason, obs.problem.message)
	case obs.podFailed:
		set(networkv1.EgressRouterDegraded, metav1.ConditionTrue, networkv1.ReasonPodFailed,
			fmt.Sprintf("pod %s failed; it is replaced", r.Name))
	case !available && prev != nil && prev.Status == metav1.ConditionTrue && prev.Reason == networkv1.ReasonPodFailed:
		// Keep reporting the failure until the replacement works.
		set(networkv1.EgressRouterDegraded, metav1.ConditionTrue, prev.Reason, prev.Message)
	default:
		set(networkv1.EgressRouterDegraded, metav1.ConditionFalse, networkv1.ReasonAsExpected, "no problem found")
	}
	slices.SortStableFunc(r.Status.Conditions, func(a, b metav1.Condition) int {
		return conditionRank(a.Type) - conditionRank(b.Type)
	})
	r.Status.ObservedGeneration = gen
	r.Status.Addresses = obs.addresses
}

// egressConditionOrder is the order the conditions are kept in. The printer column Reason shows
// the first reason that is not AsExpected, so this order makes it the one that matters: what is
// wrong (Degraded), else what is under way (Progressing), else Available's.
var egressConditionOrder = []string{networkv1.EgressRouterDegraded, networkv1.EgressRouterProgressing, networkv1.EgressRouterAvailable}

// conditionRank is typ's place in egressConditionOrder; any other type goes after them.
func conditionRank(typ string) int {
	if i := slices.Index(egressConditionOrder, typ); i >= 0 {
		return i
	}
	return len(egressConditionOrder)
}

// attachedMessage returns "" when the pod's network-status shows every router address on the
// egress interface of the router's network, else says what is missing.
func attachedMessage(pod *corev1.Pod, r *networkv1.EgressRouter, addresses []networkv1.EgressRouterAddress) string {
	raw, ok := pod.Annotations[nadv1.NetworkStatusAnnot]
	if !ok {
		return fmt.Sprintf("pod %s has no %s annotation yet", pod.Name, nadv1.NetworkStatusAnnot)
	}
	var statuses []nadv1.NetworkStatus
	if err := json.Unmarshal([]byte(raw), &statuses); err != nil {
		return fmt.Sprintf("annotation %s of pod %s is not a list of network statuses: %v", nadv1.NetworkStatusAnnot, pod.Name, err)
	}
	network := r.Namespace + "/" + r.Name
	for _, s := range statuses {
		if s.Interface != egressInterface || (s.Name != network && s.Name != r.Name) {
			continue
		}
		have := map[netip.Addr]bool{}
		for _, text := range s.IPs {
			text, _, _ = strings.Cut(strings.TrimSpace(text), "/")
			if a, err := netip.ParseAddr(text); err == nil {
				have[a.WithZone("").Unmap()] = true
			}
		}
		var missing []string
		for _, a := range addresses {
			p, err := netip.ParsePrefix(a.IP)
			if err != nil || !have[p.Addr().Unmap()] {
				missing = append(missing, a.IP)
			}
		}
		if len(missing) > 0 {
			return fmt.Sprintf("the network-status of pod %s does not show %s on %s", pod.Name, strings.Join(missing, ", "), egressInterface)
		}
		return ""
	}
	return fmt.Sprintf("the network-status of pod %s has no interface %s of network %s", pod.Name, egressInterface, network)
}

func addressList(addresses []networkv1.EgressRouterAddress) string {
	ips := make([]string, len(addresses))
	for i, a := range addresses {
		ips[i] = a.IP
	}
	return strings.Join(ips, ", ")
}
