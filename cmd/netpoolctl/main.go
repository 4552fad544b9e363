// Command netpoolctl is netpool's operator command line; its commands live in package cli.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/netpool/netpool/cli"
)

func main() {
	// An interrupt ends the command's context: `pools --watch` stops, and a request in flight is
	// abandoned rather than waited for.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.NewRoot(os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "netpoolctl:", err)
		os.Exit(1)
	}
}
