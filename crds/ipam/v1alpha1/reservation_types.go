package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels the allocator sets on every OverlappingRangeIPReservation, so that a node lists its own
// claims, and a pool's claims are counted, without reading every reservation in the cluster. Label
// values are at most 63 characters: pass names through LabelValue.
const (
	// NodeLabel holds the name of the node whose attachment holds the address (spec.node).
	NodeLabel = GroupName + "/node"

	// PoolLabel holds the name of the IPPool the address was allocated from (spec.pool).
	PoolLabel = GroupName + "/pool"
)

// NetworkAnnotation holds, on every reservation, the CNI network name (the "name" of the network
// config) of the attachment. GC releases only reservations of its own network on its own node; the
// spec's networkName is the NAD's network_name, the address scope, which several CNI networks may
// share.
const NetworkAnnotation = GroupName + "/network"

// OverlappingRangeIPReservationSpec records who holds an allocated address.
//
// +kubebuilder:validation:XValidation:rule="has(self.owner) == has(oldSelf.owner) && (!has(self.owner) || self.owner == oldSelf.owner)",message="owner is immutable: an address keeps its persistent owner until it is released"
// +kubebuilder:validation:XValidation:rule="has(self.owner) || !has(self.users)",message="users are only recorded for an address with a persistent owner"
type OverlappingRangeIPReservationSpec struct {
	// address is the allocated address, in canonical form (IPv6 lowercase and compressed). The
	// object's name is derived from it by ReservationName, which is what makes Create the atomic
	// claim. It cannot be changed.
	// +required
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="address must be an IP address"
	// +kubebuilder:validation:XValidation:rule="!isIP(self) || ip.isCanonical(self)",messageExpression="'address ' + self + ' must be in canonical form: lowercase, leading zeros dropped, the longest run of zero groups written ::'"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="address is immutable; a reservation is the claim on exactly one address"
	Address string `json:"address,omitempty"`

	// pool is the name of the IPPool the address was allocated from. It cannot be changed.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="pool is immutable"
	Pool string `json:"pool,omitempty"`

	// containerID is the CNI container ID of the attachment holding the address. Together with
	// ifName it identifies the attachment, so that a repeated ADD finds its address and DEL
	// releases it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`
	ContainerID string `json:"containerID,omitempty"`

	// ifName is the CNI interface name of the attachment inside the container (such as net1).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[^/:\s]+$`
	IfName string `json:"ifName,omitempty"`

	// podRef is the pod holding the address, as "namespace/name", from K8S_POD_NAMESPACE and
	// K8S_POD_NAME. Unset when the runtime passed no pod identity.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	PodRef string `json:"podRef,omitempty"`

	// podUID is the UID of the pod holding the address, from K8S_POD_UID. It tells a recreated pod
	// of the same name from the one that made the reservation.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	PodUID string `json:"podUID,omitempty"`

	// node is the name of the node the attachment runs on. Garbage collection on a node touches
	// only that node's reservations.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Node string `json:"node,omitempty"`

	// networkName is the network_name of the attachment's NAD, the scope within which the address
	// is unique. Unset for the unnamed network.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	NetworkName string `json:"networkName,omitempty"`
	// owner is the persistent owner of the address (an IPAMClaim), when the address outlives its
	// pods: DEL unbinds the attachment instead of releasing, and the controller releases the
	// address when the owner is gone. containerID, ifName, podRef, podUID and node then name the
	// attachment that bound it last, and users every attachment bound to it. It cannot be
	// changed, added or removed.
	// +optional
	Owner *ReservationOwner `json:"owner,omitempty"`
	// users are the attachments bound to a persistently owned address: one, or two during a live
	// migration. Only set with owner.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Users []ReservationUser `json:"users,omitempty"`
}

// OverlappingRangeIPReservation is one allocated address: the allocation record and the
// cluster-wide uniqueness lock at once. Its name is ReservationName(scope, address), so two
// attachments can never hold the same address in the same scope: the second Create gets
// AlreadyExists. There is one object per address, so no object grows with the number of
// allocations, and allocations never contend on a shared resourceVersion.
//
// The kind's name and the name derivation follow whereabouts, so that tools reading whereabouts'
// reservations recognise these.
//
// The name is derived from the address and scope (ReservationName), and two rules tie them: the
// name ends with the address in its name form, and what comes before it is the pool or the
// network name (a scope shortened with a hash, or a network name that is not a DNS name, is
// checked for form only). A reservation cannot say which pool's range or family it belongs to in
// a way CEL can check, since CEL reads no other object; the allocator only claims addresses
// inside the pool's range, and treats any reservation's spec.address as held in its scope.
//
// +kubebuilder:validation:XValidation:rule="!has(self.spec.address) || self.metadata.name == (((self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address).startsWith(':') ? '0' + (self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address) : (self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address)).replace(':', '-')) || self.metadata.name.endsWith('.' + (((self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address).startsWith(':') ? '0' + (self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address) : (self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address)).replace(':', '-')))",messageExpression="'metadata.name ' + self.metadata.name + ' is not a reservation name of spec.address ' + self.spec.address + ': the name must be the address (every : written as -, a leading or trailing - given a 0) or <scope>.<that>, because the name is the lock on the address'"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.address) || !has(self.spec.pool) || self.metadata.name == (((self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address).startsWith(':') ? '0' + (self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address) : (self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address)).replace(':', '-')) || !self.metadata.name.endsWith('.' + (((self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address).startsWith(':') ? '0' + (self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address) : (self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address)).replace(':', '-'))) || self.metadata.name.substring(0, size(self.metadata.name) - size((((self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address).startsWith(':') ? '0' + (self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address) : (self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address)).replace(':', '-'))) - 1) == self.spec.pool || (has(self.spec.networkName) && (self.metadata.name.substring(0, size(self.metadata.name) - size((((self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address).startsWith(':') ? '0' + (self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address) : (self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address)).replace(':', '-'))) - 1) == self.spec.networkName || !self.spec.networkName.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'))) || self.metadata.name.substring(0, size(self.metadata.name) - size((((self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address).startsWith(':') ? '0' + (self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address) : (self.spec.address.endsWith(':') ? self.spec.address + '0' : self.spec.address)).replace(':', '-'))) - 1).matches('-[0-9a-f]{10}$')",messageExpression="'metadata.name ' + self.metadata.name + ' must be <scope>.<address> with the scope spec.pool (' + self.spec.pool + ')' + (has(self.spec.networkName) ? ' or spec.networkName (' + self.spec.networkName + ')' : ' alone') + ', as the allocator names it'"
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=overlappingrangeipreservations,singular=overlappingrangeipreservation,scope=Cluster,shortName=npres;orir,categories=netpool
// +kubebuilder:storageversion
// +kubebuilder:selectablefield:JSONPath=`.spec.node`
// +kubebuilder:selectablefield:JSONPath=`.spec.pool`
// +kubebuilder:selectablefield:JSONPath=`.spec.containerID`
// +kubebuilder:selectablefield:JSONPath=`.spec.networkName`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.address`,description="The allocated address"
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.pool`,description="The IPPool it came from"
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.node`,description="The node of the attachment"
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.spec.podRef`,description="The pod holding it, namespace/name"
// +kubebuilder:printcolumn:name="Container",type=string,JSONPath=`.spec.containerID`,priority=1,description="The CNI container ID"
// +kubebuilder:printcolumn:name="Interface",type=string,JSONPath=`.spec.ifName`,priority=1,description="The CNI interface name"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OverlappingRangeIPReservation struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec records the address and who holds it.
	// +required
	Spec OverlappingRangeIPReservationSpec `json:"spec"`
}

// OverlappingRangeIPReservationList is a list of OverlappingRangeIPReservations.
//
// +kubebuilder:object:root=true
type OverlappingRangeIPReservationList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the reservations.
	Items []OverlappingRangeIPReservation `json:"items"`
}
