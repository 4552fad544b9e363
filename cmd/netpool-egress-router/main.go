// Command netpool-egress-router is the egress-router CNI plugin that Multus runs in an EgressRouter's
// pod; all its logic lives in package egressrouter.
package main

import (
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/netpool/netpool/cni-plugin/egressrouter"
	"github.com/netpool/netpool/internal/version"
)

func main() {
	// Runtimes pass no arguments (the CNI protocol is environment and stdin), so a lone --version
	// can only come from a person.
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-version") {
		fmt.Println(version.Line("netpool-egress-router"))
		return
	}
	skel.PluginMainFuncs(egressrouter.Funcs(), egressrouter.SupportedVersions, "netpool egress-router plugin "+version.String())
}
