package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// cluster is the envtest control plane, the binaries and the agents of one run.
type cluster struct {
	root       string // the checkout
	dir        string // work directory: kubeconfig, sockets, agent logs
	env        *crenvtest.Environment
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

func startCluster(ctx context.Context, o options) (*cluster, error) {
	root, err := goOutput("list", "-m", "-f", "{{.Dir}}")
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
	assets, err := run1(exec.Command("bash", filepath.Join(root, "hack", "envtest-binaries.sh")))
	if err != nil {
		return c, fmt.Errorf("failed to get the envtest binaries: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := ipamv1.AddToScheme(scheme); err != nil {
		return c, err
	}
	c.env = &crenvtest.Environment{
		CRDDirectoryPaths: []string{filepath.Join(root, "crds", "bases")}, ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: strings.TrimSpace(assets), Scheme: scheme,
	}
	if c.cfg, err = c.env.Start(); err != nil {
		return c, fmt.Errorf("failed to start envtest: %w", err)
	}
	c.cfg.QPS, c.cfg.Burst = 1000, 2000
	if c.client, err = client.New(c.cfg, client.Options{Scheme: scheme}); err != nil {
		return c, err
	}
	c.kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(c.kubeconfig, c.env.KubeConfig, 0o600); err != nil {
		return c, err
	}
	for i := range o.nodes {
		if err := c.startAgent(ctx, fmt.Sprintf("node-%d", i)); err != nil {
			return c, err
		}
	}
	return c, nil
}

// binaries builds netpool and netpool-agent into the work directory, or uses dir.
func (c *cluster) binaries(dir string) error {
	if dir == "" {
		dir = filepath.Join(c.dir, "bin")
		// Stripped, as release builds are: the plugin starts once per ADD, and a binary without
		// symbol tables starts measurably faster (this machine: ~1000 vs ~700 starts/s at 50 at once).
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", dir+"/", "./cmd/netpool", "./cmd/netpool-agent")
		cmd.Dir = c.root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("failed to build the binaries: %w\n%s", err, out)
		}
	}
	c.plugin, c.agentBin = filepath.Join(dir, "netpool"), filepath.Join(dir, "netpool-agent")
	return nil
}

// startAgent runs one agent process for node. The node name comes from NODENAME, which overrides
// the --node-name flag, as one machine simulates several nodes.
func (c *cluster) startAgent(ctx context.Context, node string) error {
	socket := filepath.Join(c.dir, node+".sock")
	log, err := os.Create(filepath.Join(c.dir, node+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(c.agentBin, "--kubeconfig", c.kubeconfig, "--socket", socket, "--node-name", "overridden")
	cmd.Env = append(os.Environ(), "NODENAME="+node)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("failed to start the agent of %s: %w", node, err)
	}
	a := &agentProc{node: node, socket: socket, cmd: cmd, done: make(chan error, 1)}
	go func() { a.done <- cmd.Wait(); _ = log.Close() }()
	c.agents = append(c.agents, a)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if conn, err := net.Dial("unix", socket); err == nil {
			_ = conn.Close()
			return nil
		}
		select {
		case err := <-a.done:
			return fmt.Errorf("the agent of %s exited: %v (log: %s)", node, err, log.Name())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent of %s did not listen within 60s", node)
		}
	}
}

// stop ends the agents (SIGTERM, their graceful shutdown) and the control plane.
func (c *cluster) stop(keep bool) error {
	var errs []error
	for _, a := range c.agents {
		if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			errs = append(errs, err)
			continue
		}
		select {
		case err := <-a.done:
			if err != nil {
				errs = append(errs, fmt.Errorf("agent %s: %w", a.node, err))
			}
		case <-time.After(10 * time.Second):
			_ = a.cmd.Process.Kill()
			errs = append(errs, fmt.Errorf("agent %s did not stop within 10s", a.node))
		}
	}
	if c.env != nil {
		if err := c.env.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if !keep {
		errs = append(errs, os.RemoveAll(c.dir))
	}
	return errors.Join(errs...)
}

func goOutput(args ...string) (string, error) {
	out, err := run1(exec.Command("go", args...))
	return strings.TrimSpace(out), err
}

func run1(cmd *exec.Cmd) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, stderr.Bytes())
	}
	return stdout.String(), nil
}
