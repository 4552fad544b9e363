package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// ReservationOwnerKind is the kind of a reservation's persistent owner.
// +kubebuilder:validation:Enum=IPAMClaim;StatefulSet
// +kubebuilder:validation:MaxLength=32
type ReservationOwnerKind string

// Persistent owner kinds.
const (
	// OwnerIPAMClaim: the address belongs to an IPAMClaim (k8s.cni.cncf.io/v1alpha1) of the
	// owner's namespace and name, and is released when the claim is deleted.
	OwnerIPAMClaim ReservationOwnerKind = "IPAMClaim"
	// OwnerStatefulSet: the address belongs to one interface of one ordinal of a StatefulSet
	// (apps/v1) of the owner's namespace and name, in a pool with statefulSets: Sticky, and is
	// released when the StatefulSet is deleted or scaled to ordinal replicas or fewer.
	OwnerStatefulSet ReservationOwnerKind = "StatefulSet"
)

// OwnerLabel holds, on a persistently owned reservation, a digest of its owner (OwnerLabelValue):
// an agent finds the owner's address by it when another node holds it.
const OwnerLabel = GroupName + "/owner"

// MaxReservationUsers bounds spec.users: a live migration has two pods on the address, and an
// entry left by a node that no longer holds the reservation is dropped at the next take-over.
const MaxReservationUsers = 8

// ReservationOwner is the persistent owner of an address: an identity that outlives the pods
// using it. A reservation with an owner is not released when its pods go; its owner's end
// releases it (the controller's GC).
// +kubebuilder:validation:XValidation:rule="(self.kind == 'StatefulSet') == has(self.ordinal)",message="ordinal is set for, and only for, an owner of kind StatefulSet"
// +kubebuilder:validation:XValidation:rule="(self.kind == 'StatefulSet') == has(self.interface)",message="interface is set for, and only for, an owner of kind StatefulSet"
// +kubebuilder:validation:XValidation:rule="self.kind == 'IPAMClaim' || !has(self.uid)",message="uid is set only for an owner of kind IPAMClaim"
type ReservationOwner struct {
	// kind is the owner's kind: IPAMClaim or StatefulSet.
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
	// ordinal is the StatefulSet pod's ordinal (kind StatefulSet only).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	Ordinal *int32 `json:"ordinal,omitempty"`
	// interface is the CNI interface name of the StatefulSet pod's attachment (kind StatefulSet
	// only): each interface of an ordinal owns its own address.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[^/:\s]+$`
	Interface string `json:"interface,omitempty"`
	// uid is the IPAMClaim's UID (kind IPAMClaim only): a claim deleted and created again under
	// the same name is another claim, which does not inherit the address. Reservations made
	// before netpool recorded it have none, and belong to the claim of their name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	UID string `json:"uid,omitempty"`
}

// Key is the owner as one string, the allocator's name for it: kind/namespace/name, and for a
// StatefulSet /ordinal/interface after it.
func (o ReservationOwner) Key() string {
	k := o.ObjectKey()
	if o.Ordinal != nil {
		k += "/" + strconv.Itoa(int(*o.Ordinal)) + "/" + o.Interface
	}
	return k
}

// ObjectKey names the object that owns the address, kind/namespace/name: every reservation of
// one StatefulSet shares it, whatever the ordinal and interface.
func (o ReservationOwner) ObjectKey() string {
	return string(o.Kind) + "/" + o.Namespace + "/" + o.Name
}

// OwnerLabelValue is the value of OwnerLabel for owner key (Key): a digest, since a key is
// longer than a label value may be.
func OwnerLabelValue(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:20])
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

// Is reports whether o (nil: none) is the owner want: the same kind, object, ordinal and
// interface, and, where both record one, the same UID (a claim made again under the name of a
// deleted one is not its owner). Compare owners with it, not with ==, which would compare the
// ordinals' pointers.
func (o *ReservationOwner) Is(want ReservationOwner) bool {
	return o != nil && o.Key() == want.Key() && (o.UID == "" || want.UID == "" || o.UID == want.UID)
}

// DropUsers removes from r's users (spec.users) those drop selects, and reports whether any went.
// When the holder (spec.containerID, ifName, podRef, podUID) goes while others stay bound, the last
// bound of them becomes the holder, so that nothing finds the address under an attachment that
// left it; when the last goes, the holder stays as a record of who held it last. The agent unbinds
// its own attachments and the controller removes users whose pods are gone, both with it.
func (r *OverlappingRangeIPReservation) DropUsers(drop func(ReservationUser) bool) bool {
	var kept []ReservationUser
	holderKept := false
	for _, u := range r.Spec.Users {
		if drop(u) {
			continue
		}
		kept = append(kept, u)
		holderKept = holderKept || u.ContainerID == r.Spec.ContainerID && u.IfName == r.Spec.IfName
	}
	if len(kept) == len(r.Spec.Users) {
		return false
	}
	r.Spec.Users = kept
	if len(kept) > 0 && !holderKept {
		last := kept[len(kept)-1]
		r.Spec.ContainerID, r.Spec.IfName, r.Spec.PodRef, r.Spec.PodUID = last.ContainerID, last.IfName, last.PodRef, last.PodUID
	}
	return true
}
