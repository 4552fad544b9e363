// Package version holds the version of netpool's binaries, one variable for all of them.
//
// `make build` sets it from hack/version.sh (git describe's form, counted from the committed
// VERSION file where the clone has no tags):
//
//	go build -ldflags "-X github.com/netpool/netpool/internal/version.Version=$(hack/version.sh)"
//
// A plain `go build` leaves it empty; String then reports what the Go toolchain stamped into the
// binary (the module version, or a pseudo-version from the VCS), or "devel".
package version

import (
	"fmt"
	"runtime/debug"
)

// Version is the release, set by the linker; empty in a plain `go build`.
var Version = ""

// String returns the version this binary was built as: Version when the build set it, else the
// main module's version from the build info, else "devel".
func String() string {
	if Version != "" {
		return Version
	}
	return fromBuildInfo(debug.ReadBuildInfo())
}

// fromBuildInfo is the fallback of String: the main module's version, unless the toolchain only
// knew it as "(devel)".
func fromBuildInfo(bi *debug.BuildInfo, ok bool) string {
	if ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// Line is what `--version` prints for the binary name: the name and the version, on one line.
func Line(name string) string {
	return fmt.Sprintf("%s %s", name, String())
}
