//go:build tools

package harness

// This file is never built. It imports the reference plugins that BinDir builds with `go build`
// from this module, so that `go mod tidy` keeps their dependencies in go.mod and go.sum; without
// it, tidy drops them and a machine with an empty plugin cache (CI) cannot build the plugins.
import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/macvlan"
)
