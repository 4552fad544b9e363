package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every netpool IPAM kind.
const GroupName = "ipam.netpool.io"

var (
	// GroupVersion is the group and version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

	// schemeBuilder collects the functions that add this package's types to a scheme.
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the IPPool, OverlappingRangeIPReservation and IPPoolSlice kinds (and their
	// lists) to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

// Resource turns an unqualified resource name (such as "ippools") into a group-qualified one.
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&IPPool{}, &IPPoolList{},
		&OverlappingRangeIPReservation{}, &OverlappingRangeIPReservationList{},
		&IPPoolSlice{}, &IPPoolSliceList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
