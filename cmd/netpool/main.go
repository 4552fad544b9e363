// Command netpool is the netpool CNI IPAM plugin. Runtimes exec it once per attachment; all its
// logic lives in package ipamplugin.
package main

import (
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/netpool/netpool/cni-plugin/ipamplugin"
	"github.com/netpool/netpool/internal/version"
)

func main() {
	// Runtimes pass no arguments (the CNI protocol is environment and stdin), so a lone --version
	// can only come from a person.
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-version") {
		fmt.Println(version.Line("netpool"))
		return
	}
	skel.PluginMainFuncs(ipamplugin.New().Funcs(), ipamplugin.SupportedVersions, "netpool IPAM plugin "+version.String())
}
