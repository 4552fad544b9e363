// Package scheme is the one registry of the kinds netpool reads and writes, for the controller, the
// node agent's store, netpoolctl and the tests: a client made with another scheme could fail to
// decode a kind that one of them meets.
package scheme

import (
	"fmt"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	networkv1 "github.com/netpool/netpool/crds/network/v1"
)

// New returns a scheme with client-go's built-in kinds (pods, nodes, namespaces, StatefulSets,
// events, leases), netpool's ipam.netpool.io and network.netpool.io kinds, Multus'
// NetworkAttachmentDefinition and the IPAMClaims that own persistent addresses.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		ipamv1.AddToScheme,
		networkv1.AddToScheme,
		nadv1.AddToScheme,
		ipamclaimsv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("failed to build the scheme: %w", err)
		}
	}
	return s, nil
}
