package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of an EgressRouter. The reconciler sets all three on every reconcile, with
// observedGeneration, as OpenShift's operator names them.
const (
	// EgressRouterAvailable is True when the router's pod is Ready and its network-status shows
	// every router address on the egress interface, so traffic sent to the Service is redirected.
	EgressRouterAvailable = "Available"

	// EgressRouterProgressing is True while the reconciler moves the router to its spec: the pod is
	// being replaced (the old one must be gone before the new one is created) or has not come up yet.
	EgressRouterProgressing = "Progressing"

	// EgressRouterDegraded is True when the reconciler cannot reach the spec: the reason says why.
	EgressRouterDegraded = "Degraded"
)

// Reasons of the EgressRouter conditions. They are CamelCase, stable, and meant for machines; the
// message carries the detail (which object, which address, which pool).
const (
	// ReasonAsExpected is the False reason of Progressing and Degraded when nothing is amiss.
	ReasonAsExpected = "AsExpected"

	// ReasonRouterReady is the Available=True reason.
	ReasonRouterReady = "RouterReady"

	// ReasonPodNotReady (Available=False) says the pod does not exist yet, or is not Ready.
	ReasonPodNotReady = "PodNotReady"

	// ReasonAddressNotAttached (Available=False) says the pod is Ready but its network-status does
	// not show the router's addresses on the egress interface.
	ReasonAddressNotAttached = "AddressNotAttached"

	// ReasonReplacingPod (Progressing=True) says the pod of an older config is being deleted; its
	// successor is created once it is gone.
	ReasonReplacingPod = "ReplacingPod"

	// ReasonCreatingPod (Progressing=True) says the pod of the current config was created and is
	// not Available yet.
	ReasonCreatingPod = "CreatingPod"

	// ReasonNameConflict (Degraded=True) says an object named after the router (NAD, Pod or
	// Service) exists and is not controlled by this router; it is left untouched.
	ReasonNameConflict = "NameConflict"

	// ReasonPoolNotFound (Degraded=True) says spec.pool names no IPPool.
	ReasonPoolNotFound = "PoolNotFound"

	// ReasonPoolInvalid (Degraded=True) says the pool cannot serve the router: its spec does not
	// parse, it has no gateway while an address is to be allocated, or its family has no use.
	ReasonPoolInvalid = "PoolInvalid"

	// ReasonPoolExhausted (Degraded=True) says the pool has no free address to allocate.
	ReasonPoolExhausted = "PoolExhausted"

	// ReasonAddressNotInPool (Degraded=True) says an address of spec.addresses lies outside the
	// pool's range or is excluded from it.
	ReasonAddressNotInPool = "AddressNotInPool"

	// ReasonAddressInUse (Degraded=True) says the pool already hands an address of spec.addresses
	// to someone else.
	ReasonAddressInUse = "AddressInUse"

	// ReasonPoolNotAdmitted (Degraded=True) says the pool's namespaceSelector (or that of a pool
	// whose addresses it overlaps) does not admit the router's namespace; nothing is claimed.
	ReasonPoolNotAdmitted = "PoolNotAdmitted"

	// ReasonUnsupportedMode (Degraded=True) says spec.mode is one this controller does not
	// implement (a CRD newer than the controller); the router's children are left as they are.
	ReasonUnsupportedMode = "UnsupportedMode"

	// ReasonPodFailed (Degraded=True) says the router's pod has failed or its sandbox could not be
	// set up; the pod is replaced.
	ReasonPodFailed = "PodFailed"
)

// Labels the reconciler sets.
const (
	// RouterLabel, on the router's pod, holds the router's name (as a label value): the Service
	// selects the pod with it.
	RouterLabel = GroupName + "/egress-router"

	// RouterUIDLabel, on the OverlappingRangeIPReservation that claims a router address in its
	// pool, holds the router's UID: the reservation belongs to that router, not to a pod or a node.
	RouterUIDLabel = GroupName + "/egress-router-uid"

	// OpenShiftPodLabel and OpenShiftPodLabelValue are the label OpenShift's operator gives its
	// router pods, app: egress-router-cni. Pod X carries it too, so that a Service written for
	// OpenShift (its procedure selects the router's pod by it) selects Pod X. Service X selects by
	// RouterLabel, which tells routers apart.
	OpenShiftPodLabel      = "app"
	OpenShiftPodLabelValue = "egress-router-cni"
)

// ConfigHashAnnotation, on the router's pod, is a hash of everything the pod was made from (the
// NAD config, the image, the node selector). A pod with another hash belongs to an older config
// and is replaced.
const ConfigHashAnnotation = GroupName + "/config-hash"

// ReleaseAddressFinalizer keeps a router until its pod is gone and the addresses it claimed in a
// pool are released, so an address is never free while a pod may still hold it.
const ReleaseAddressFinalizer = GroupName + "/release-address"

// EgressRouterMode is how the router forwards. Redirect, the only mode, DNATs each rule's port to
// its destination. The enum alone bounds it (and CEL's cost estimate), so that an unsupported mode
// is told which are supported rather than how long a mode may be.
// +kubebuilder:validation:Enum=Redirect
type EgressRouterMode string

// EgressRouterModeRedirect redirects traffic sent to the router's own address to the rules'
// destinations (and the fallback).
const EgressRouterModeRedirect EgressRouterMode = "Redirect"

// ProtocolType is a transport protocol of a redirect rule (bounded by its enum alone).
// +kubebuilder:validation:Enum=TCP;UDP;SCTP
type ProtocolType string

// The protocols of redirect rules.
const (
	ProtocolTypeTCP  ProtocolType = "TCP"
	ProtocolTypeUDP  ProtocolType = "UDP"
	ProtocolTypeSCTP ProtocolType = "SCTP"
)

// MacvlanMode is the mode of the router's macvlan interface (ip-link(8)), bounded by its enum alone.
// +kubebuilder:validation:Enum=Bridge;Private;VEPA;Passthru
type MacvlanMode string

// The macvlan modes.
const (
	// MacvlanModeBridge lets macvlans of one master reach each other directly.
	MacvlanModeBridge MacvlanMode = "Bridge"
	// MacvlanModePrivate forbids traffic between macvlans of one master.
	MacvlanModePrivate MacvlanMode = "Private"
	// MacvlanModeVEPA sends traffic between macvlans of one master out through the switch.
	MacvlanModeVEPA MacvlanMode = "VEPA"
	// MacvlanModePassthru gives the master to a single macvlan: the node loses the interface, so
	// the master must be named (and the plugin refuses one that holds the node's addresses or a
	// default route).
	MacvlanModePassthru MacvlanMode = "Passthru"
)

// L4RedirectRule is one DNAT redirection: traffic sent to the router on port with protocol goes to
// destinationIP:targetPort.
type L4RedirectRule struct {
	// destinationIP is the remote destination's IP address, IPv4 or IPv6. It must have the family
	// of one of the router's addresses.
	// +required
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="destinationIP must be an IPv4 or IPv6 address"
	DestinationIP string `json:"destinationIP"`

	// port is the port clients send to, on the router's Service and address.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// protocol is TCP, UDP or SCTP.
	// +required
	Protocol ProtocolType `json:"protocol"`

	// targetPort is the port on the destination. When unset, port is used.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	TargetPort int32 `json:"targetPort,omitempty"`
}

// RedirectConfig is the configuration of the Redirect mode.
// +kubebuilder:validation:XValidation:rule="(has(self.redirectRules) && size(self.redirectRules) > 0) || has(self.fallbackIP)",message="redirect needs at least one redirectRule or a fallbackIP"
type RedirectConfig struct {
	// redirectRules are the DNAT redirections, at most one per (port, protocol).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y.port == x.port && y.protocol == x.protocol))",message="each (port, protocol) may appear in only one redirect rule"
	RedirectRules []L4RedirectRule `json:"redirectRules,omitempty"`

	// fallbackIP is where traffic on any port without a rule goes (IPv4 or IPv6). Without it such
	// traffic is rejected. With no rules, every port goes to it.
	// +optional
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="fallbackIP must be an IPv4 or IPv6 address"
	FallbackIP string `json:"fallbackIP,omitempty"`
}

// MacvlanConfig configures the router's macvlan interface.
// +kubebuilder:validation:XValidation:rule="self.mode != 'Passthru' || (has(self.master) && size(self.master) > 0)",message="master is required with mode Passthru: a passthru macvlan takes the whole interface from the node, and the default master, the interface of the node's default route, is the node's uplink"
type MacvlanConfig struct {
	// mode is the macvlan mode: Bridge (the default), Private, VEPA or Passthru.
	// +required
	// +kubebuilder:default=Bridge
	Mode MacvlanMode `json:"mode,omitempty"`

	// master is the host interface the macvlan sits on. When empty, the interface of the node's
	// default route is used; Passthru requires it.
	// +optional
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:XValidation:rule="self == '' || (self != '.' && self != '..' && self.matches('^[^/:[:space:]]+$'))",message="master must be a network interface name: at most 15 characters, none of them '/', ':' or whitespace, and not '.' or '..'"
	Master string `json:"master,omitempty"`
}

// EgressRouterInterface is the router's egress interface. macvlan is the only kind.
// +kubebuilder:validation:XValidation:rule="has(self.macvlan)",message="networkInterface.macvlan is required"
type EgressRouterInterface struct {
	// macvlan configures the macvlan interface.
	// +required
	// +kubebuilder:default={mode: Bridge}
	Macvlan MacvlanConfig `json:"macvlan,omitzero"`
}

// EgressRouterAddress is one address of the router's egress interface and its gateway.
// +kubebuilder:validation:XValidation:rule="has(self.gateway)",message="gateway is required: the router sends through it"
// +kubebuilder:validation:XValidation:rule="!has(self.gateway) || !isCIDR(self.ip) || !isIP(self.gateway) || cidr(self.ip).containsIP(self.gateway)",messageExpression="'gateway ' + self.gateway + ' is not inside the subnet of ' + self.ip"
// +kubebuilder:validation:XValidation:rule="!has(self.gateway) || !isCIDR(self.ip) || !isIP(self.gateway) || !self.ip.startsWith(self.gateway + '/')",messageExpression="'gateway ' + self.gateway + ' is the router address itself'"
type EgressRouterAddress struct {
	// ip is the address with its prefix length (a CIDR such as 192.168.12.99/24), IPv4 or IPv6.
	// +required
	// +kubebuilder:validation:MinLength=4
	// +kubebuilder:validation:MaxLength=49
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",messageExpression="'ip ' + self + ' must be an address with its prefix length, such as 192.168.12.99/24 or fd00:12::99/64'"
	IP string `json:"ip"`

	// gateway is the next hop for the router's egress traffic, inside ip's subnet. OpenShift
	// leaves it optional; netpool requires it, because the router cannot send without it.
	// +optional
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="gateway must be an IPv4 or IPv6 address"
	Gateway string `json:"gateway,omitempty"`
}

// EgressRouterSpec is the desired router. mode, networkInterface and addresses (or, netpool's
// extension, pool) are set together with the configuration of the mode.
//
// +kubebuilder:validation:XValidation:rule="self.mode != 'Redirect' || has(self.redirect)",message="redirect is required when mode is Redirect"
// +kubebuilder:validation:XValidation:rule="has(self.pool) || (has(self.addresses) && size(self.addresses) > 0)",message="at least one address is required, unless pool is set to allocate one"
// +kubebuilder:validation:XValidation:rule="!has(self.redirect) || !has(self.redirect.redirectRules) || !has(self.addresses) || size(self.addresses) == 0 || self.redirect.redirectRules.all(r, !isIP(r.destinationIP) || self.addresses.exists(a, isCIDR(a.ip) && cidr(a.ip).ip().family() == ip(r.destinationIP).family()))",message="every redirectRules destinationIP must have the IP family of one of the addresses"
// +kubebuilder:validation:XValidation:rule="!has(self.redirect) || !has(self.redirect.fallbackIP) || !isIP(self.redirect.fallbackIP) || !has(self.addresses) || size(self.addresses) == 0 || self.addresses.exists(a, isCIDR(a.ip) && cidr(a.ip).ip().family() == ip(self.redirect.fallbackIP).family())",message="fallbackIP must have the IP family of one of the addresses"
type EgressRouterSpec struct {
	// mode is how the router forwards; Redirect, the default, is the only mode.
	// +required
	// +kubebuilder:default=Redirect
	Mode EgressRouterMode `json:"mode,omitempty"`

	// redirect is the configuration of the Redirect mode; required in that mode.
	// +optional
	Redirect *RedirectConfig `json:"redirect,omitempty"`

	// networkInterface is the egress interface to create; the default is a macvlan in Bridge mode
	// on the node's default-route interface.
	// +required
	// +kubebuilder:default={macvlan: {mode: Bridge}}
	NetworkInterface EgressRouterInterface `json:"networkInterface,omitzero"`

	// addresses are the router's addresses on the egress interface with their gateways: at least
	// one (unless pool allocates it), at most one per IP family.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:XValidation:rule="self.all(a, !isCIDR(a.ip) || self.exists_one(b, isCIDR(b.ip) && cidr(b.ip).ip().family() == cidr(a.ip).ip().family()))",message="addresses may hold at most one IPv4 and one IPv6 address"
	Addresses []EgressRouterAddress `json:"addresses,omitempty"`

	// nodeSelector limits the nodes the router's pod may run on (those whose egress network the
	// master interface reaches). netpool's extension; unset, any node.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// pool is the name of a netpool IPPool the router's address belongs to. The reconciler claims
	// every address of addresses in that pool (an OverlappingRangeIPReservation the router owns),
	// so no pod is handed it, and a claim that conflicts fails clearly. With addresses empty, one
	// address is allocated from the pool (with the pool's gateway) and reported in status.
	// netpool's extension.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Pool string `json:"pool,omitempty"`
}

// EgressRouterStatus is the observed state of a router, written by the reconciler.
type EgressRouterStatus struct {
	// conditions are Degraded, Progressing and Available (see the EgressRouter* constants), kept
	// in that order: the Reason column shows the first reason that is not AsExpected, which is
	// thus the one that matters.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the metadata.generation of the spec this status was computed from.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// addresses are the addresses the router uses (spec.addresses, or those allocated from the
	// pool), with their gateways.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=2
	Addresses []EgressRouterAddress `json:"addresses,omitempty"`
}

// EgressRouter gives a set of pods one fixed source address on an external network: clients send
// to the Service named after the router; the router's pod (same name) redirects that traffic out
// of a macvlan interface, described by the NAD of the same name, with the router's address as the
// source.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=egressrouters,singular=egressrouter,scope=Namespaced,shortName=er,categories=netpool
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="the name must be a DNS-1035 label (at most 63 lowercase letters, digits and '-', starting with a letter), because the router's Service is named after it"
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.addresses[0].ip`,description="The router's first address in use"
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`,description="Whether the router redirects traffic"
// +kubebuilder:printcolumn:name="Progressing",type=string,JSONPath=`.status.conditions[?(@.type=="Progressing")].status`,description="Whether the router's pod is being created or replaced"
// +kubebuilder:printcolumn:name="Degraded",type=string,JSONPath=`.status.conditions[?(@.type=="Degraded")].status`,description="Whether the reconciler cannot reach the spec"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.reason!="AsExpected")].reason`,description="The reason that matters: Degraded's, else Progressing's, else Available's (conditions are kept in that order)"
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.reason!="AsExpected")].message`,priority=1,description="The message of that reason's condition"
// +kubebuilder:printcolumn:name="Second Address",type=string,JSONPath=`.status.addresses[1].ip`,priority=1,description="The router's other address in use (a dual-stack router's); a column shows one value"
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.pool`,priority=1,description="The IPPool the address is claimed in"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EgressRouter struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired router.
	// +required
	Spec EgressRouterSpec `json:"spec"`

	// status is the observed state of the router.
	// +optional
	Status EgressRouterStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the router's status conditions.
func (r *EgressRouter) GetConditions() []metav1.Condition {
	return r.Status.Conditions
}

// SetConditions replaces the router's status conditions.
func (r *EgressRouter) SetConditions(conditions []metav1.Condition) {
	r.Status.Conditions = conditions
}

// EgressRouterList is a list of EgressRouters.
//
// +kubebuilder:object:root=true
type EgressRouterList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the routers.
	Items []EgressRouter `json:"items"`
}
