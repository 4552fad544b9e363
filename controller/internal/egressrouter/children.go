package egressrouter

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	networkv1 "github.com/netpool/netpool/crds/network/v1"
	"github.com/netpool/netpool/crds/network/v1/egressnad"
)

// What the reconciler builds for router X: NAD X, Pod X and Service X. Everything here is a pure
// function of the router, its resolved addresses and the pod image, so the config hash is stable.

const (
	// egressCNIVersion is the CNI version of the NAD config.
	egressCNIVersion = "1.1.0"
	// egressInterface is the pod's egress interface, the CNI_IFNAME Multus passes.
	egressInterface = "net1"
	// egressClusterInterface is the pod's cluster-network interface.
	egressClusterInterface = "eth0"
	// egressContainerName is the name of the pod's only container.
	egressContainerName = "router"
	// egressPodUser is the non-root user the pod runs as (the pause image's own).
	egressPodUser = 65535
	// egressTerminationGrace is short: the pod holds no state, and its successor waits for it.
	egressTerminationGrace = 5
)

// DefaultImage is the image of the router pods: it only holds the network namespace,
// in which the kernel does the NAT.
const DefaultImage = "registry.k8s.io/pause:3.10"

// egressNetworkSelection is one element of the pod's k8s.v1.cni.cncf.io/networks annotation.
type egressNetworkSelection struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Interface string `json:"interface"`
}

// egressDesired is everything the children of one router are made from.
type egressDesired struct {
	router *networkv1.EgressRouter
	// mode is the router's mode, which makes its part of the NAD config and the Service.
	mode egressMode
	// addresses are the resolved addresses: spec.addresses, or those allocated from the pool.
	addresses []networkv1.EgressRouterAddress
	image     string
	// nadConfig is the NAD's spec.config; networks is the pod's networks annotation; hash covers
	// both and the pod spec. Set by newEgressDesired.
	nadConfig string
	networks  string
	hash      string
}

// newEgressDesired computes the NAD config, the networks annotation and the config hash.
func newEgressDesired(r *networkv1.EgressRouter, mode egressMode, addresses []networkv1.EgressRouterAddress, image string) (*egressDesired, error) {
	d := &egressDesired{router: r, mode: mode, addresses: addresses, image: image}
	cfg := egressnad.Config{
		CNIVersion: egressCNIVersion,
		Name:       r.Name,
		Type:       egressnad.PluginType,
		Interface: &egressnad.Interface{
			Type:   "macvlan",
			Master: r.Spec.NetworkInterface.Macvlan.Master,
			Mode:   strings.ToLower(string(macvlanModeOrDefault(r.Spec.NetworkInterface.Macvlan.Mode))),
		},
		ClusterInterface: egressClusterInterface,
		Addresses:        []egressnad.Address{},
		MACSeed:          r.Namespace + "/" + r.Name,
	}
	for _, a := range addresses {
		cfg.Addresses = append(cfg.Addresses, egressnad.Address{IP: a.IP, Gateway: a.Gateway})
	}
	mode.configure(&cfg)
	b, err := json.Marshal(&cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the NAD config: %w", err)
	}
	d.nadConfig = string(b)
	nb, err := json.Marshal([]egressNetworkSelection{{Name: r.Name, Namespace: r.Namespace, Interface: egressInterface}})
	if err != nil {
		return nil, fmt.Errorf("failed to encode the networks annotation: %w", err)
	}
	d.networks = string(nb)
	spec, err := json.Marshal(d.podSpec())
	if err != nil {
		return nil, fmt.Errorf("failed to encode the pod spec: %w", err)
	}
	sum := sha256.New()
	for _, part := range [][]byte{b, nb, spec} {
		sum.Write(part)
		sum.Write([]byte{0})
	}
	d.hash = hex.EncodeToString(sum.Sum(nil))[:16]
	return d, nil
}

func macvlanModeOrDefault(m networkv1.MacvlanMode) networkv1.MacvlanMode {
	if m == "" {
		return networkv1.MacvlanModeBridge
	}
	return m
}

// ownerRef is the controller reference every child carries.
func (d *egressDesired) ownerRef() *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(networkv1.GroupVersion.String()).
		WithKind("EgressRouter").
		WithName(d.router.Name).
		WithUID(d.router.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// routerLabels select the router's pod: Service X's selector.
func (d *egressDesired) routerLabels() map[string]string {
	return map[string]string{networkv1.RouterLabel: ipamv1.LabelValue(d.router.Name)}
}

// podLabels are Pod X's labels: routerLabels and OpenShift's.
func (d *egressDesired) podLabels() map[string]string {
	labels := d.routerLabels()
	labels[networkv1.OpenShiftPodLabel] = networkv1.OpenShiftPodLabelValue
	return labels
}

// nad is the apply configuration of NAD X. The NAD client has no apply configurations, so it is
// built as unstructured.
func (d *egressDesired) nad() *unstructured.Unstructured {
	r := d.router
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": nadv1.SchemeGroupVersion.String(),
		"kind":       "NetworkAttachmentDefinition",
		"metadata": map[string]any{
			"name":      r.Name,
			"namespace": r.Namespace,
			"ownerReferences": []any{map[string]any{
				"apiVersion": networkv1.GroupVersion.String(), "kind": "EgressRouter", "name": r.Name,
				"uid": string(r.UID), "controller": true, "blockOwnerDeletion": true,
			}},
		},
		"spec": map[string]any{"config": d.nadConfig},
	}}
	return u
}

// podSpec is the spec of Pod X: one container of the configured image that holds the network
// namespace, under the restricted Pod Security profile. The CNI plugin, run by Multus outside
// the pod, is what needs privileges.
func (d *egressDesired) podSpec() *corev1ac.PodSpecApplyConfiguration {
	spec := corev1ac.PodSpec().
		WithAutomountServiceAccountToken(false).
		WithEnableServiceLinks(false).
		WithTerminationGracePeriodSeconds(egressTerminationGrace).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsNonRoot(true).
			WithRunAsUser(egressPodUser).
			WithRunAsGroup(egressPodUser).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
		WithContainers(corev1ac.Container().
			WithName(egressContainerName).
			WithImage(d.image).
			WithSecurityContext(corev1ac.SecurityContext().
				WithAllowPrivilegeEscalation(false).
				WithReadOnlyRootFilesystem(true).
				WithRunAsNonRoot(true).
				WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))))
	if len(d.router.Spec.NodeSelector) > 0 {
		spec.WithNodeSelector(d.router.Spec.NodeSelector)
	}
	return spec
}

// pod is the apply configuration of Pod X.
func (d *egressDesired) pod() *corev1ac.PodApplyConfiguration {
	r := d.router
	return corev1ac.Pod(r.Name, r.Namespace).
		WithLabels(d.podLabels()).
		WithAnnotations(map[string]string{
			nadv1.NetworkAttachmentAnnot:   d.networks,
			networkv1.ConfigHashAnnotation: d.hash,
		}).
		WithOwnerReferences(d.ownerRef()).
		WithSpec(d.podSpec())
}

// newPod is Pod X as an object, for its Create: a pod is created only once its predecessor is gone,
// and a Create (unlike an Apply) can never patch a pod that appeared meanwhile.
func (d *egressDesired) newPod() (*corev1.Pod, error) {
	b, err := json.Marshal(d.pod())
	if err != nil {
		return nil, fmt.Errorf("failed to encode pod %s/%s: %w", d.router.Namespace, d.router.Name, err)
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(b, pod); err != nil {
		return nil, fmt.Errorf("failed to decode pod %s/%s: %w", d.router.Namespace, d.router.Name, err)
	}
	return pod, nil
}

// headless reports whether Service X has no ports, which the router's mode decides (Redirect
// with only a fallback forwards every port, which a Service cannot list).
func (d *egressDesired) headless() bool {
	return len(d.mode.servicePorts()) == 0
}

// service is the apply configuration of Service X: one port per rule, whose targetPort is the
// rule's port (the pod receives on port and DNATs to the rule's targetPort).
func (d *egressDesired) service() *corev1ac.ServiceApplyConfiguration {
	r := d.router
	spec := corev1ac.ServiceSpec().WithSelector(d.routerLabels())
	if d.headless() {
		spec.WithClusterIP(corev1.ClusterIPNone)
	}
	for _, p := range d.servicePorts() {
		spec.WithPorts(corev1ac.ServicePort().WithName(p.Name).WithProtocol(p.Protocol).WithPort(p.Port).WithTargetPort(p.TargetPort))
	}
	return corev1ac.Service(r.Name, r.Namespace).
		WithOwnerReferences(d.ownerRef()).
		WithSpec(spec)
}

// servicePorts are the ports of Service X, as the router's mode has them.
func (d *egressDesired) servicePorts() []corev1.ServicePort {
	return d.mode.servicePorts()
}

// podReady reports whether the pod's Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
