package cluster_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/netpool/netpool/test/cluster"
)

// The suite shares one cluster: starting one takes tens of seconds. TestMain starts it, runs the
// tests, stops it and then checks that it left nothing behind, failing the run if it did.
// gcGrace is the controller's --gc-grace on the suite's cluster: deploy/'s 2m would make every
// test of a GC release wait two minutes; a minute still outlasts the set-up before each of them,
// so that a test sees the grace hold before it sees the release.
const gcGrace = time.Minute

var (
	shared   *cluster.Cluster
	startErr error
)

func TestMain(m *testing.M) {
	// Parse flags first: testing.Short is known only then.
	// The tests' controller-runtime clients log nothing worth reading; say so once.
	ctrllog.SetLogger(logr.Discard())
	if !parseShort() {
		os.Exit(m.Run()) // every test skips itself under -short, saying why
	}
	nodes := 2
	if s := os.Getenv("NETPOOL_CLUSTER_NODES"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			nodes = n
		}
	}
	start := time.Now()
	shared, startErr = startCluster(nodes)
	if startErr == nil {
		fmt.Fprintf(os.Stderr, "cluster of %d nodes up in %s\n", nodes, time.Since(start).Round(100*time.Millisecond))
	}
	code := m.Run()
	removeNetpoolctl()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the cluster:", err)
			code = 1
		}
		after, err := cluster.TakeFootprint()
		if err != nil {
			fmt.Fprintln(os.Stderr, "reading the machine after the cluster:", err)
			code = 1
		} else if left := cluster.Leftovers(shared.Before(), after); len(left) > 0 {
			fmt.Fprintln(os.Stderr, "the cluster left behind:")
			for _, l := range left {
				fmt.Fprintln(os.Stderr, "  "+l)
			}
			code = 1
		} else {
			fmt.Fprintln(os.Stderr, "teardown left nothing behind (links, mounts, cgroups, nftables tables, processes, directories, sysctls)")
		}
	}
	os.Exit(code)
}

// parseShort parses the test flags before m.Run does, so that TestMain can read -short, and
// reports whether the run is a full one.
func parseShort() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	return !testing.Short()
}

func startCluster(nodes int) (*cluster.Cluster, error) {
	root, err := cluster.ModuleRoot()
	if err != nil {
		return nil, err
	}
	bin, assets, err := cluster.Binaries(root)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{
		Nodes: nodes, BinDir: bin, AssetsDir: assets, Root: root, ImageTag: "cluster-test",
		Progress: os.Stderr, GCGrace: gcGrace,
	})
	if err == nil {
		// netpool as the README's quick start installs it; TestInstall checks what it did.
		err = c.InstallNetpool(ctx)
	}
	if err != nil {
		if c != nil {
			logs := ""
			if c.LogDir() != "" {
				logs = "; logs: " + c.LogDir()
			}
			if serr := c.Stop(); serr != nil {
				err = fmt.Errorf("%w (and stopping: %v)", err, serr)
			}
			err = fmt.Errorf("%w%s", err, logs)
		}
		return nil, err
	}
	return c, nil
}

// need returns the shared cluster, skipping t under -short and failing it, with the reason, when
// the cluster could not start: a machine that cannot run the cluster makes the suite red.
func need(t *testing.T) *cluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs root and a real cluster (kubelet, containerd, runc: hack/cluster-binaries.sh); skipped under -short")
	}
	if startErr != nil {
		t.Fatalf("the cluster did not start: %v", startErr)
	}
	if err := shared.Check(); err != nil {
		t.Fatalf("the cluster is broken: %v", err)
	}
	return shared
}
