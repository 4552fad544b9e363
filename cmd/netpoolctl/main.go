// Command netpoolctl is netpool's operator command line; its commands live in package cli.
package main

import (
	"fmt"
	"os"

	"github.com/netpool/netpool/cli"
)

func main() {
	if err := cli.NewRoot(os.Stdout, os.Stderr).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "netpoolctl:", err)
		os.Exit(1)
	}
}
