// Command image builds netpool's container image without a Docker engine: every binary, static,
// for each platform, in one layer on an empty base, written as an OCI layout, an OCI archive
// (podman load, ctr images import, docker load of Docker 25+) and a docker-archive tarball of the
// linux/amd64 image (any docker load). make image runs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	var o Options
	var platforms string
	flag.StringVar(&o.OutDir, "out", "bin/image", "directory for the OCI layout and the tarballs")
	flag.StringVar(&o.Repository, "repository", DefaultRepository, "image repository the tarballs are tagged with")
	flag.StringVar(&o.Version, "version", "dev", "image tag and org.opencontainers.image.version")
	flag.StringVar(&o.LDFlags, "ldflags", "", "extra -ldflags for every binary (the version stamp)")
	flag.StringVar(&platforms, "platforms", strings.Join(DefaultPlatforms, ","), "comma-separated os/arch list")
	flag.Parse()
	o.Platforms = strings.Split(platforms, ",")
	o.Progress = os.Stderr
	res, err := Build(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("image %s:%s (%s)\n", o.Repository, o.Version, res.IndexDigest)
}
