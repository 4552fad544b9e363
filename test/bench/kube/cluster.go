package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/test/bench/benchenv"
)

// cluster is the envtest control plane, the binaries and the agents of one run.
type cluster struct {
	root       string // the checkout
	dir        string // work directory: kubeconfig, sockets, agent logs
	plane      *benchenv.ControlPlane
	cfg        *rest.Config
	client     client.Client
	kubeconfig string
	plugin     string
	agentBin   string
	agents     []*agentProc
}

type agentProc struct {
	node   string
	socket string
	cmd    *exec.Cmd
	done   chan error
}

// startCluster starts the control plane and nodes agents (node-0, node-1, ...).
func startCluster(ctx context.Context, o options, nodes int) (*cluster, error) {
	root, err := benchenv.Root()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "npbench")
	if err != nil {
		return nil, err
	}
	c := &cluster{root: root, dir: dir}
	if err := c.binaries(o.binDir); err != nil {
		return c, err
	}
	if c.plane, err = benchenv.Start(root, benchenv.Options{QPS: 1000, Burst: 2000}); err != nil {
		return c, err
	}
	c.cfg, c.client = c.plane.Config, c.plane.Client
	c.kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := c.plane.WriteKubeconfig(c.kubeconfig); err != nil {
		return c, err
	}
	for i := range nodes {
		if _, err := c.startAgent(ctx, fmt.Sprintf("node-%d", i)); err != nil {
			return c, err
		}
	}
	return c, nil
}

// binaries builds netpool and netpool-agent into the work directory, or uses dir.
func (c *cluster) binaries(dir string) error {
	if dir == "" {
		dir = filepath.Join(c.dir, "bin")
		if err := buildBinaries(c.root, dir); err != nil {
			return err
		}
	}
	c.plugin, c.agentBin = filepath.Join(dir, "netpool"), filepath.Join(dir, "netpool-agent")
	return nil
}

// buildBinaries builds netpool and netpool-agent of the checkout root into dir.
func buildBinaries(root, dir string) error {
	// Stripped, as release builds are: the plugin starts once per ADD, and a binary without
	// symbol tables starts measurably faster (this machine: ~1000 vs ~700 starts/s at 50 at once).
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", dir+"/", "./cmd/netpool", "./cmd/netpool-agent")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("failed to build the binaries: %w\n%s", err, out)
	}
	return nil
}

// startAgent runs one agent process for node and returns once it listens, which it does only after
// its cache has synced. The node name comes from NODENAME, which overrides the --node-name flag, as
// one machine simulates several nodes. A restarted agent appends to the node's log.
func (c *cluster) startAgent(ctx context.Context, node string) (*agentProc, error) {
	socket := filepath.Join(c.dir, node+".sock")
	log, err := os.OpenFile(filepath.Join(c.dir, node+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.agentBin, "--kubeconfig", c.kubeconfig, "--socket", socket, "--node-name", "overridden")
	cmd.Env = append(os.Environ(), "NODENAME="+node)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("failed to start the agent of %s: %w", node, err)
	}
	a := &agentProc{node: node, socket: socket, cmd: cmd, done: make(chan error, 1)}
	go func() { a.done <- cmd.Wait(); _ = log.Close() }()
	c.agents = append(c.agents, a)
	const wait = 120 * time.Second // an agent of a node holding 100,000 reservations lists them all first
	deadline := time.Now().Add(wait)
	for {
		if conn, err := net.Dial("unix", socket); err == nil {
			_ = conn.Close()
			return a, nil
		}
		select {
		case err := <-a.done:
			a.done <- err // for stopAgent
			return a, fmt.Errorf("the agent of %s exited: %v (log: %s)", node, err, log.Name())
		case <-ctx.Done():
			return a, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return a, fmt.Errorf("the agent of %s did not listen within %s", node, wait)
		}
	}
}

// stopAgent ends one agent (SIGTERM, its graceful shutdown) and forgets it.
func (c *cluster) stopAgent(a *agentProc) error {
	c.agents = slices.DeleteFunc(c.agents, func(x *agentProc) bool { return x == a })
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case err := <-a.done:
		if err != nil {
			return fmt.Errorf("agent %s: %w", a.node, err)
		}
		return nil
	case <-time.After(10 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
		return fmt.Errorf("agent %s did not stop within 10s", a.node)
	}
}

// close stops the cluster and says so on standard output, beside the tables: an error in stopping
// and, with keep, the work directory it leaves.
func (c *cluster) close(keep bool) {
	if err := c.stop(keep); err != nil {
		fmt.Println("bench: stopping:", err)
	}
	if keep {
		fmt.Println("work directory:", c.dir)
	}
}

// stop ends the agents (SIGTERM, their graceful shutdown) and the control plane.
func (c *cluster) stop(keep bool) error {
	var errs []error
	for _, a := range slices.Clone(c.agents) {
		errs = append(errs, c.stopAgent(a))
	}
	if c.plane != nil {
		if err := c.plane.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if !keep {
		errs = append(errs, os.RemoveAll(c.dir))
	}
	return errors.Join(errs...)
}
