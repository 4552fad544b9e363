// Package v1alpha1 holds the netpool IPAM API, group ipam.netpool.io, version v1alpha1.
//
// Three cluster-scoped kinds carry the Kubernetes-mode state:
//
//   - IPPool: one address range of one network, with its exclusions, gateway and the selectors that
//     say which namespaces and nodes may draw from it. Its status reports capacity and usage.
//   - OverlappingRangeIPReservation: one object per allocated address. Its name is derived from the
//     address (and the network scope), so creating it is the atomic, cluster-wide claim on the address.
//   - IPPoolSlice: a block of a pool's range owned by one node, so that nodes choose candidates from
//     disjoint blocks and never race each other for the same address.
//
// What a CRD can check without a webhook is checked by CEL rules on the types (valid and canonical
// CIDRs and IPs, rangeStart <= rangeEnd, addresses inside the range, immutable ranges and addresses);
// docs/kubernetes-api.md lists them. Names are derived by PoolName, ReservationName and SliceName.
//
// The package imports only the standard library and k8s.io/apimachinery, so that a slim client (the
// CNI plugin) can use the types without linking client-go or controller-runtime.
//
// +kubebuilder:object:generate=true
// +groupName=ipam.netpool.io
package v1alpha1
