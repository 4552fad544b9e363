// Command netpool is the netpool CNI IPAM plugin. Runtimes exec it once per attachment; all its
// logic lives in package ipamplugin.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/netpool/netpool/cni-plugin/ipamplugin"
)

func main() {
	skel.PluginMainFuncs(ipamplugin.New().Funcs(), ipamplugin.SupportedVersions, "netpool IPAM plugin")
}
