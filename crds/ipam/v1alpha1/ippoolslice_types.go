package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxSliceCooling is the most cooling addresses one IPPoolSlice records (the CRD's MaxItems of
// spec.cooling): about 30 KiB, well under the 64 KiB that no object netpool writes may reach.
const MaxSliceCooling = 512

// IPPoolSliceSpec says which block of which pool belongs to which node.
//
// +kubebuilder:validation:XValidation:rule="!has(self.cooling) || !isCIDR(self.range) || self.cooling.all(c, isIP(c.address) && cidr(self.range).containsIP(c.address))",message="every cooling address must be an address of the block (spec.range)"
type IPPoolSliceSpec struct {
	// pool is the name of the IPPool the block is carved from. It cannot be changed.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="pool is immutable"
	Pool string `json:"pool,omitempty"`

	// range is the block, a CIDR inside the pool's range whose prefix length is the pool's
	// sliceSize, written as its network address in canonical form. It cannot be changed.
	// +required
	// +kubebuilder:validation:MinLength=4
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="range must be a CIDR such as 10.0.0.64/26 or fd00::/120"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || string(cidr(self).masked()) == self",messageExpression="'range ' + self + ' must be written as its network address in canonical form, such as 10.0.0.64/26 (not 10.0.0.65/26) or fd00::/120 (not FD00:0::/120)'"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="range is immutable; delete the slice and claim another"
	Range string `json:"range,omitempty"`

	// node is the name of the node that owns the block and allocates from it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Node string `json:"node,omitempty"`

	// cooling are addresses of the block that the node released under its pool's reuseCooldown
	// and may not hand out again yet, with when each was released. The node writes them behind
	// its releases (coalesced, about a second later), so they survive a restart of its agent, and
	// every allocator that claims in the pool (another node borrowing, the controller's
	// EgressRouter) passes over them while anything else is free. An entry is cooling until
	// releasedAt plus the pool's spec.reuseCooldown; expired entries are ignored and dropped at the
	// node's next write. At most 512 entries (the releases most recent); a block holding more
	// cooling addresses keeps the rest in the agent's memory only.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=512
	Cooling []CoolingAddress `json:"cooling,omitempty"`
}

// CoolingAddress is one address of a block that cools after its release.
type CoolingAddress struct {
	// address is the released address.
	// +required
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=45
	Address string `json:"address,omitempty"`

	// releasedAt is when the node released it.
	// +required
	ReleasedAt metav1.Time `json:"releasedAt,omitzero"`
}

// IPPoolSlice is a block of an IPPool's range claimed by one node. Its name is
// SliceName(pool, index), index being the block's position in the range, so claiming a block is
// one atomic Create: AlreadyExists means another node owns it.
//
// Why this kind exists: reservations alone make every address a cluster-wide race. When many
// nodes allocate from one pool at once, they all compute the same "lowest free address", and all
// but one Create fail with AlreadyExists and retry, so throughput falls as nodes are added. With
// slices, a node picks candidate addresses only from blocks it owns, so two nodes never try the
// same address, and the only cross-node contention is the rare claim of a new block. The
// reservation stays the lock that guarantees uniqueness; a slice only steers candidates, so a
// stale or lost slice can cost a retry but never a duplicate.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ippoolslices,singular=ippoolslice,scope=Cluster,shortName=npslice,categories=netpool
// +kubebuilder:storageversion
// +kubebuilder:selectablefield:JSONPath=`.spec.pool`
// +kubebuilder:selectablefield:JSONPath=`.spec.node`
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.pool`,description="The IPPool the block is carved from"
// +kubebuilder:printcolumn:name="Range",type=string,JSONPath=`.spec.range`,description="The block"
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.node`,description="The node that owns the block"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IPPoolSlice struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says which block of which pool the node owns.
	// +required
	Spec IPPoolSliceSpec `json:"spec"`
}

// IPPoolSliceList is a list of IPPoolSlices.
//
// +kubebuilder:object:root=true
type IPPoolSliceList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the slices.
	Items []IPPoolSlice `json:"items"`
}
