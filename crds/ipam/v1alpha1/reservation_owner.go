package v1alpha1

// ReservationOwnerKind is the kind of a reservation's persistent owner.
// +kubebuilder:validation:Enum=IPAMClaim
// +kubebuilder:validation:MaxLength=32
type ReservationOwnerKind string

// Persistent owner kinds.
const (
	// OwnerIPAMClaim: the address belongs to an IPAMClaim (k8s.cni.cncf.io/v1alpha1) of the
	// owner's namespace and name, and is released when the claim is deleted.
	OwnerIPAMClaim ReservationOwnerKind = "IPAMClaim"
)

// MaxReservationUsers bounds spec.users: a live migration has two pods on the address, and an
// entry left by a node that no longer holds the reservation is dropped at the next take-over.
const MaxReservationUsers = 8

// ReservationOwner is the persistent owner of an address: an identity that outlives the pods
// using it. A reservation with an owner is not released when its pods go; its owner's end
// releases it (the controller's GC).
type ReservationOwner struct {
	// kind is the owner's kind: IPAMClaim.
	// +required
	Kind ReservationOwnerKind `json:"kind,omitempty"`
	// namespace is the owner's namespace (the pods' namespace).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`
	// name is the owner's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`
}

// Key is the owner as one string, the allocator's name for it: kind/namespace/name.
func (o ReservationOwner) Key() string {
	return string(o.Kind) + "/" + o.Namespace + "/" + o.Name
}

// ReservationUser is one attachment bound to a persistently owned address. During a live
// migration the source's and the target's pods are both users.
type ReservationUser struct {
	// containerID is the attachment's CNI container ID.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`
	ContainerID string `json:"containerID,omitempty"`
	// ifName is the attachment's CNI interface name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[^/:\s]+$`
	IfName string `json:"ifName,omitempty"`
	// podRef is the attachment's pod, "namespace/name".
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	PodRef string `json:"podRef,omitempty"`
	// podUID is the UID of the attachment's pod.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	PodUID string `json:"podUID,omitempty"`
	// node is the node the attachment runs on.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Node string `json:"node,omitempty"`
}
