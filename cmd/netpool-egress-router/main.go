// Command netpool-egress-router is the egress-router CNI plugin that Multus runs in an EgressRouter's
// pod; all its logic lives in package egressrouter.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/netpool/netpool/cni-plugin/egressrouter"
)

func main() {
	skel.PluginMainFuncs(egressrouter.Funcs(), egressrouter.SupportedVersions, "netpool egress-router plugin")
}
