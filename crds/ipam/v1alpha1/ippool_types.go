package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of an IPPool. The controller sets all three on every reconcile, with
// observedGeneration, so that a reader can tell a fresh verdict from a stale one.
const (
	// IPPoolReadyCondition is True when the pool's spec is valid and it has at least one free
	// address, so an allocation from it can succeed now. Its reasons are IPPoolAvailableReason
	// (True), IPPoolInvalidSpecReason and IPPoolExhaustedReason (False).
	IPPoolReadyCondition = "Ready"

	// IPPoolExhaustedCondition is True when every usable address of the pool is allocated, so the
	// next allocation fails. Its reasons are IPPoolExhaustedReason (True) and
	// IPPoolAddressesAvailableReason (False).
	IPPoolExhaustedCondition = "Exhausted"

	// IPPoolInvalidCondition is True when the spec passed the API server's checks but cannot be
	// served, for example because the exclusions and rangeStart/rangeEnd leave no usable address, or
	// the range overlaps another pool of the same network. Its reasons are IPPoolInvalidSpecReason
	// (True) and IPPoolValidSpecReason (False).
	IPPoolInvalidCondition = "Invalid"
)

// Reasons of the IPPool conditions. They are CamelCase, stable, and meant for machines; the
// condition's message carries the detail (which address, which entry, which other pool).
const (
	// IPPoolAvailableReason is the Ready=True reason: the pool is valid and has free addresses.
	IPPoolAvailableReason = "Available"

	// IPPoolExhaustedReason is the reason of Exhausted=True and of Ready=False when no usable
	// address is free.
	IPPoolExhaustedReason = "PoolExhausted"

	// IPPoolAddressesAvailableReason is the Exhausted=False reason: at least one address is free.
	IPPoolAddressesAvailableReason = "AddressesAvailable"

	// IPPoolInvalidSpecReason is the reason of Invalid=True and of Ready=False when the spec cannot
	// be served; the message names the offending field and value.
	IPPoolInvalidSpecReason = "InvalidSpec"

	// IPPoolValidSpecReason is the Invalid=False reason.
	IPPoolValidSpecReason = "ValidSpec"
)

// OverlappingRanges is how far an address of a pool is unique: the enable_overlapping_ranges of
// the configs that draw from the pool, recorded on the pool so that every config agrees.
// +kubebuilder:validation:Enum=Enabled;Disabled
// +kubebuilder:validation:MaxLength=8
type OverlappingRanges string

const (
	// OverlappingRangesEnabled (enable_overlapping_ranges true, the default): an address is unique
	// among every pool of the pool's networkName.
	OverlappingRangesEnabled OverlappingRanges = "Enabled"
	// OverlappingRangesDisabled (enable_overlapping_ranges false): an address is unique within this
	// pool only, so pools of one network that overlap may hand out the same address.
	OverlappingRangesDisabled OverlappingRanges = "Disabled"
)

// StatefulSets is what a pool does for the pods of a StatefulSet.
// +kubebuilder:validation:Enum=Sticky;None
// +kubebuilder:validation:MaxLength=8
type StatefulSets string

const (
	// StatefulSetsNone (unset means None): a StatefulSet's pod owns its address like any pod.
	StatefulSetsNone StatefulSets = "None"
	// StatefulSetsSticky: the address belongs to the pod's identity (namespace, StatefulSet,
	// ordinal, interface), so a recreated pod gets it back on any node, until the StatefulSet is
	// deleted or scaled to that ordinal or below.
	StatefulSetsSticky StatefulSets = "Sticky"
)

// DerivedLabel marks an IPPool derived from a NAD's inline range (created by the controller or a
// node agent under PoolName), as opposed to one a cluster operator made. Its value is
// DerivedLabelValue. A derived pool that overlaps an operator's pool yields to it, and the
// controller deletes a derived pool that no NAD uses and that holds no reservation.
const DerivedLabel = GroupName + "/derived"

// DerivedLabelValue is the value of DerivedLabel.
const DerivedLabelValue = "inline"

// IPPoolSpec is the desired state of an IPPool: the addresses it may hand out, and who may use them.
//
// The API server enforces, without a webhook: range is a canonical CIDR and never changes;
// rangeStart, rangeEnd and gateway are canonical IPs inside range; rangeStart <= rangeEnd; every
// exclude entry is an IP or CIDR inside range; sliceSize fits the range and never changes.
//
// +kubebuilder:validation:XValidation:rule="!has(self.rangeStart) || !isIP(self.rangeStart) || !isCIDR(self.range) || cidr(self.range).containsIP(self.rangeStart)",messageExpression="'rangeStart ' + self.rangeStart + ' is not inside range ' + self.range"
// +kubebuilder:validation:XValidation:rule="!has(self.rangeEnd) || !isIP(self.rangeEnd) || !isCIDR(self.range) || cidr(self.range).containsIP(self.rangeEnd)",messageExpression="'rangeEnd ' + self.rangeEnd + ' is not inside range ' + self.range"
// +kubebuilder:validation:XValidation:rule="!has(self.gateway) || !isIP(self.gateway) || !isCIDR(self.range) || cidr(self.range).containsIP(self.gateway)",messageExpression="'gateway ' + self.gateway + ' is not inside range ' + self.range"
// +kubebuilder:validation:XValidation:rule="!has(self.rangeStart) || !has(self.rangeEnd) || !isIP(self.rangeStart) || !isIP(self.rangeEnd) || !{'/0': '/1', '/1': '/2', '/2': '/3', '/3': '/4', '/4': '/5', '/5': '/6', '/6': '/7', '/7': '/8', '/8': '/9', '/9': '/10', '/10': '/11', '/11': '/12', '/12': '/13', '/13': '/14', '/14': '/15', '/15': '/16', '/16': '/17', '/17': '/18', '/18': '/19', '/19': '/20', '/20': '/21', '/21': '/22', '/22': '/23', '/23': '/24', '/24': '/25', '/25': '/26', '/26': '/27', '/27': '/28', '/28': '/29', '/29': '/30', '/30': '/31', '/31': '/32', '/32': '/33', '/33': '/34', '/34': '/35', '/35': '/36', '/36': '/37', '/37': '/38', '/38': '/39', '/39': '/40', '/40': '/41', '/41': '/42', '/42': '/43', '/43': '/44', '/44': '/45', '/45': '/46', '/46': '/47', '/47': '/48', '/48': '/49', '/49': '/50', '/50': '/51', '/51': '/52', '/52': '/53', '/53': '/54', '/54': '/55', '/55': '/56', '/56': '/57', '/57': '/58', '/58': '/59', '/59': '/60', '/60': '/61', '/61': '/62', '/62': '/63', '/63': '/64', '/64': '/65', '/65': '/66', '/66': '/67', '/67': '/68', '/68': '/69', '/69': '/70', '/70': '/71', '/71': '/72', '/72': '/73', '/73': '/74', '/74': '/75', '/75': '/76', '/76': '/77', '/77': '/78', '/78': '/79', '/79': '/80', '/80': '/81', '/81': '/82', '/82': '/83', '/83': '/84', '/84': '/85', '/85': '/86', '/86': '/87', '/87': '/88', '/88': '/89', '/89': '/90', '/90': '/91', '/91': '/92', '/92': '/93', '/93': '/94', '/94': '/95', '/95': '/96', '/96': '/97', '/97': '/98', '/98': '/99', '/99': '/100', '/100': '/101', '/101': '/102', '/102': '/103', '/103': '/104', '/104': '/105', '/105': '/106', '/106': '/107', '/107': '/108', '/108': '/109', '/109': '/110', '/110': '/111', '/111': '/112', '/112': '/113', '/113': '/114', '/114': '/115', '/115': '/116', '/116': '/117', '/117': '/118', '/118': '/119', '/119': '/120', '/120': '/121', '/121': '/122', '/122': '/123', '/123': '/124', '/124': '/125', '/125': '/126', '/126': '/127', '/127': '/128'}.exists(a, b, isCIDR(self.rangeEnd + b) && isCIDR(self.rangeStart + a) && cidr(self.rangeEnd + b).masked().ip() == cidr(self.rangeStart + a).masked().ip() && !cidr(self.rangeEnd + b).containsIP(self.rangeStart))",messageExpression="'rangeStart ' + self.rangeStart + ' is after rangeEnd ' + self.rangeEnd"
// +kubebuilder:validation:XValidation:rule="!has(self.exclude) || !isCIDR(self.range) || self.exclude.all(e, (isIP(e) && cidr(self.range).containsIP(e)) || (isCIDR(e) && cidr(self.range).containsCIDR(e)))",message="every exclude entry must be an IP address or CIDR inside range"
// +kubebuilder:validation:XValidation:rule="!has(self.sliceSize) || self.sliceSize == 0 || !isCIDR(self.range) || (self.sliceSize >= cidr(self.range).prefixLength() && self.sliceSize <= (cidr(self.range).ip().family() == 4 ? 32 : 128))",message="sliceSize must be 0 or a prefix length from the range's own prefix length up to 32 (IPv4) or 128 (IPv6)"
// +kubebuilder:validation:XValidation:rule="(has(self.sliceSize) ? self.sliceSize : 0) == (has(oldSelf.sliceSize) ? oldSelf.sliceSize : 0)",message="sliceSize is immutable: nodes' slices were carved with it; create a new pool instead"
// +kubebuilder:validation:XValidation:rule="(has(self.overlappingRanges) ? self.overlappingRanges : 'Enabled') == (has(oldSelf.overlappingRanges) ? oldSelf.overlappingRanges : 'Enabled')",message="overlappingRanges is immutable: the pool's reservations are named for it; create a new pool instead"
type IPPoolSpec struct {
	// range is the CIDR the pool hands out addresses from, written as its network address in
	// canonical form (no host bits, IPv6 lowercase and compressed), such as 10.0.0.0/24 or
	// fd00:10::/64. It cannot be changed: create a new pool for a different range.
	// +required
	// +kubebuilder:validation:MinLength=4
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="range must be a CIDR such as 10.0.0.0/24 or fd00::/64"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || string(cidr(self).masked()) == self",messageExpression="'range ' + self + ' must be written as its network address in canonical form, such as 10.0.0.0/24 (not 10.0.0.1/24) or fd00::/64 (not FD00:0::/64)'"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="range is immutable; create a new pool for a different range"
	Range string `json:"range,omitempty"`

	// rangeStart is the first address of range that may be handed out. When unset, the first
	// usable address of range is.
	// +optional
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="rangeStart must be an IP address"
	// +kubebuilder:validation:XValidation:rule="!isIP(self) || ip.isCanonical(self)",messageExpression="'rangeStart ' + self + ' must be in canonical form: lowercase, leading zeros dropped, the longest run of zero groups written ::'"
	RangeStart string `json:"rangeStart,omitempty"`

	// rangeEnd is the last address of range that may be handed out. When unset, the last usable
	// address of range is. It must not come before rangeStart.
	// +optional
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="rangeEnd must be an IP address"
	// +kubebuilder:validation:XValidation:rule="!isIP(self) || ip.isCanonical(self)",messageExpression="'rangeEnd ' + self + ' must be in canonical form: lowercase, leading zeros dropped, the longest run of zero groups written ::'"
	RangeEnd string `json:"rangeEnd,omitempty"`

	// exclude lists addresses (10.0.0.7) and CIDRs (10.0.0.0/28) inside range that are never handed
	// out. A CIDR with host bits set (10.0.0.5/30) excludes its whole network, as in whereabouts.
	// +optional
	// +listType=set
	// The limit, 256, is the limit on the exclusions of every range (ipam.MaxExclude): a config
	// whose exclusions make more CIDRs is refused everywhere.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=2
	// +kubebuilder:validation:items:MaxLength=49
	Exclude []string `json:"exclude,omitempty"`

	// gateway is the address handed to attachments as their default gateway. It lies inside range
	// and is never handed out as an attachment's own address.
	// +optional
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="gateway must be an IP address"
	// +kubebuilder:validation:XValidation:rule="!isIP(self) || ip.isCanonical(self)",messageExpression="'gateway ' + self + ' must be in canonical form: lowercase, leading zeros dropped, the longest run of zero groups written ::'"
	Gateway string `json:"gateway,omitempty"`

	// networkName is the network_name of the NADs that draw from this pool. Pools of different
	// networks may overlap: an address is then unique per network, not cluster-wide. Pools of
	// the same network (or both without one) share one address space.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	NetworkName string `json:"networkName,omitempty"`

	// namespaceSelector limits which namespaces' NADs and pods may draw from this pool. The cluster
	// operator owns pools and application developers own NADs, so an operator-made pool that a NAD
	// references by name admits only the namespaces this selects. When unset, every namespace may
	// draw from it. An inline (derived) pool of the same network whose window overlaps this one's
	// admits only the namespaces this selects, too.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// nodeSelector limits which nodes may allocate from this pool: the node agent checks it
	// against the labels of its own Node and refuses the others (CNI error 7). When unset, every
	// node may. Like namespaceSelector, it also governs the addresses of any pool of the same
	// network whose window overlaps this one's.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// sliceSize is the prefix length of the blocks (IPPoolSlices) a node claims from range, for
	// example 26 for blocks of 64 addresses in an IPv4 pool. It lies between the prefix length of
	// range and the address width. 0 or unset lets the allocator choose. It cannot be changed,
	// because existing slices were carved with it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	SliceSize int32 `json:"sliceSize,omitempty"`

	// overlappingRanges records the enable_overlapping_ranges of the configs that draw from this
	// pool: Enabled (unset means Enabled, whereabouts' default) makes an address unique among every
	// pool of networkName, Disabled only within this pool. A derived pool records the first config's
	// setting. A config whose enable_overlapping_ranges disagrees is refused (CNI error 7), because
	// two configs that name one address differently would hand it out twice; a config that
	// references the pool by name and does not set it follows the pool. It cannot be changed.
	// +optional
	OverlappingRanges OverlappingRanges `json:"overlappingRanges,omitempty"`

	// reuseCooldown is how long an address released from this pool is passed over while any
	// other address is free: a Go duration such as 30s or 1h, 0s or unset for none, at most 168h.
	// When only cooling addresses are free, the one released longest ago is handed out; an
	// address requested by name is never held back. A derived pool records the first config's
	// reuseCooldown. A config that states another value is refused (CNI error 7); one that does
	// not state it follows the pool. It may be changed; the new value applies from the next
	// allocation. The grammar is bounded (16 characters, at most 6 digits per number) so that no
	// value overflows a duration.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]{1,6}([.][0-9]{1,6})?(ns|us|ms|s|m|h))+)$')",messageExpression="'reuseCooldown ' + self + ' must be a duration such as 30s or 1h (0s for none)'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(0|([0-9]{1,6}([.][0-9]{1,6})?(ns|us|ms|s|m|h))+)$') || self == '0' || duration(self) == duration('0s') || (duration(self) >= duration('1s') && duration(self) <= duration('168h'))",messageExpression="'reuseCooldown ' + self + ' must be 0s (none) or from 1s to 168h'"
	ReuseCooldown string `json:"reuseCooldown,omitempty"`

	// statefulSets is Sticky to give each pod of a StatefulSet (identified by namespace,
	// StatefulSet, ordinal and interface) the same address whenever it is recreated, on any node,
	// until the StatefulSet is deleted or scaled to that ordinal or below; None (unset) lets a
	// StatefulSet's pod own its address like any pod. A derived pool records the first config's
	// statefulSets. A config that states another value is refused (CNI error 7); one that does not
	// state it follows the pool. It may be changed; the new value applies to the next ADD.
	// +optional
	StatefulSets StatefulSets `json:"statefulSets,omitempty"`
}

// IPPoolStatus is the observed state of an IPPool, written by the controller.
type IPPoolStatus struct {
	// conditions are Ready, Exhausted and Invalid (see the IPPool*Condition constants).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// capacity is the number of addresses the pool can hand out (range, narrowed by rangeStart and
	// rangeEnd, minus exclusions, the gateway and any reserved network/broadcast address), as a
	// decimal string, because an IPv6 range holds more than an int64 can count.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^(0|[1-9][0-9]*)$`
	Capacity string `json:"capacity,omitempty"`

	// allocated is the number of reservations currently held in the pool.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Allocated *int64 `json:"allocated,omitempty"`

	// free is capacity minus allocated, as a decimal string like capacity.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^(0|[1-9][0-9]*)$`
	Free string `json:"free,omitempty"`

	// observedGeneration is the metadata.generation of the spec this status was computed from.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// IPPool is one address range of one network, from which attachments get their addresses.
//
// A pool is made by the cluster operator and referenced by name from a NAD, or derived from a NAD's
// inline (whereabouts-style) range and created under the name PoolName returns. Each allocated
// address is an OverlappingRangeIPReservation; the pool object itself never grows with the number
// of allocations.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ippools,singular=ippool,scope=Cluster,shortName=nppool;ipp,categories=netpool
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Range",type=string,JSONPath=`.spec.range`,description="The CIDR addresses are handed out from"
// +kubebuilder:printcolumn:name="Capacity",type=string,JSONPath=`.status.capacity`,description="Addresses the pool can hand out"
// +kubebuilder:printcolumn:name="Used",type=integer,JSONPath=`.status.allocated`,description="Addresses currently reserved"
// +kubebuilder:printcolumn:name="Free",type=string,JSONPath=`.status.free`,description="Addresses still free"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether an allocation can succeed now"
// +kubebuilder:printcolumn:name="Network",type=string,JSONPath=`.spec.networkName`,priority=1,description="The network_name of the NADs using the pool"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IPPool struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the pool.
	// +required
	Spec IPPoolSpec `json:"spec"`

	// status is the observed state of the pool.
	// +optional
	Status IPPoolStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the pool's status conditions.
func (p *IPPool) GetConditions() []metav1.Condition {
	return p.Status.Conditions
}

// SetConditions replaces the pool's status conditions.
func (p *IPPool) SetConditions(conditions []metav1.Condition) {
	p.Status.Conditions = conditions
}

// IPPoolList is a list of IPPools.
//
// +kubebuilder:object:root=true
type IPPoolList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the pools.
	Items []IPPool `json:"items"`
}
