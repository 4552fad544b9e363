package ipamplugin

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
)

// MaxContainerIDLen bounds CNI_CONTAINERID. It is the reservation CRD's spec.containerID bound, so
// both datastores accept the same IDs, and it keeps the embedded store's owner keys far below
// bbolt's 32 KiB key limit. Runtimes use 64-character IDs.
const MaxContainerIDLen = 256

// checkEnv rejects CNI environment values netpool cannot store, with the spec's code 4 (invalid
// environment variables), before any config is read or any state touched.
func checkEnv(args *skel.CmdArgs) error {
	if len(args.ContainerID) > MaxContainerIDLen {
		return types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("CNI_CONTAINERID is %d bytes, longer than the %d netpool accepts", len(args.ContainerID), MaxContainerIDLen), "")
	}
	return nil
}
