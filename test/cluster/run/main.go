// Command run is make cluster: it starts a real cluster on this machine (test/cluster) with netpool
// installed from deploy/ as the README's quick start installs it, prints what a script needs to use
// it, each on a line of its own (export KUBECONFIG=..., KUBECTL=..., TEST_IMAGE=..., then
// NETPOOL_READY), and keeps it up until SIGINT or SIGTERM; then it tears the cluster down and
// checks that nothing was left behind.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/netpool/netpool/test/cluster"
)

func main() {
	nodes := flag.Int("nodes", 2, "number of nodes")
	tag := flag.String("image-tag", "cluster", "tag of the netpool image imported on the nodes")
	flag.Parse()
	os.Exit(run(*nodes, *tag))
}

func run(nodes int, tag string) int {
	start := time.Now()
	root, err := cluster.ModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		return 1
	}
	bin, assets, err := cluster.Binaries(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		return 1
	}
	// Signals from the moment anything starts: a Ctrl-C during start-up still tears down.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := cluster.Start(ctx, cluster.Options{Nodes: nodes, BinDir: bin, AssetsDir: assets, Root: root, ImageTag: tag, Progress: os.Stderr})
	if err == nil {
		err = c.InstallNetpool(ctx)
	}
	code := 0
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		fmt.Fprintln(os.Stderr, "cluster: logs of every daemon:", c.LogDir())
		code = 1
	} else {
		fmt.Fprintf(os.Stderr, "cluster: netpool ready in %s; Ctrl-C (or SIGTERM) stops and removes the cluster\n", time.Since(start).Round(100*time.Millisecond))
		fmt.Printf("export KUBECONFIG=%s\n", c.Kubeconfig)
		fmt.Printf("KUBECTL=%s\n", filepath.Join(bin, "kubectl"))
		fmt.Printf("TEST_IMAGE=%s\n", cluster.TestImage)
		fmt.Println("NETPOOL_READY")
		code = watch(ctx, c)
	}
	stop() // a second Ctrl-C during teardown kills the process, as usual
	fmt.Fprintln(os.Stderr, "cluster: stopping")
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster: stopping:", err)
		code = 1
	}
	if c.Before() != nil {
		after, err := cluster.TakeFootprint()
		if err != nil {
			fmt.Fprintln(os.Stderr, "cluster:", err)
			return 1
		}
		if left := cluster.Leftovers(c.Before(), after); len(left) > 0 {
			fmt.Fprintln(os.Stderr, "cluster: left behind:")
			for _, l := range left {
				fmt.Fprintln(os.Stderr, "  "+l)
			}
			return 1
		}
		fmt.Fprintln(os.Stderr, "cluster: stopped; nothing left behind")
	}
	return code
}

// watch waits for the signal, saying once if a daemon exits meanwhile.
func watch(ctx context.Context, c *cluster.Cluster) int {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	code := 0
	for {
		select {
		case <-ctx.Done():
			return code
		case <-t.C:
			if err := c.Check(); err != nil && code == 0 {
				fmt.Fprintln(os.Stderr, "cluster:", err)
				code = 1
			}
		}
	}
}
