package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/test/bench/benchenv"
	"github.com/netpool/netpool/test/bench/benchproc"
)

// cluster is the envtest control plane, the controller binary and its process.
type cluster struct {
	root       string // the checkout
	dir        string // work directory: kubeconfig, the controller's log
	plane      *benchenv.ControlPlane
	cfg        *rest.Config
	client     client.WithWatch
	kubeconfig string
	binary     string
	controller *controllerProc
	starts     int // controllers started, numbering their logs
}

// controllerProc is the running controller.
type controllerProc struct {
	cmd     *exec.Cmd
	done    chan error
	log     string
	metrics string // host:port of /metrics
	health  string // host:port of /healthz and /readyz
	started time.Time
}

// startCluster starts kube-apiserver and etcd with netpool's CRDs and the NAD CRD, and builds the
// controller (or takes it from o.binDir). On error the returned cluster, if any, must be stopped.
func startCluster(o options) (*cluster, error) {
	root, err := benchenv.Root()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "npctrlbench")
	if err != nil {
		return nil, err
	}
	c := &cluster{root: root, dir: dir}
	if err := c.build(o.binDir); err != nil {
		return c, err
	}
	if c.plane, err = benchenv.Start(root, benchenv.Options{NAD: true, QPS: 2000, Burst: 4000}); err != nil {
		return c, err
	}
	c.cfg, c.client = c.plane.Config, c.plane.Client
	c.kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	return c, c.plane.WriteKubeconfig(c.kubeconfig)
}

// build compiles cmd/netpool-controller into the work directory, or uses dir.
func (c *cluster) build(dir string) error {
	if dir == "" {
		dir = filepath.Join(c.dir, "bin")
		cmd := exec.Command("go", "build", "-trimpath", "-o", dir+"/", "./cmd/netpool-controller")
		cmd.Dir = c.root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("failed to build the controller: %w\n%s", err, out)
		}
	}
	c.binary = filepath.Join(dir, "netpool-controller")
	return nil
}

// startController runs the controller binary with its defaults, except a single replica (no
// leader election), the bench's grace and loopback listeners.
func (c *cluster) startController(o options) error {
	metrics, err := benchproc.FreeAddr()
	if err != nil {
		return err
	}
	health, err := benchproc.FreeAddr()
	if err != nil {
		return err
	}
	c.starts++
	logPath := filepath.Join(c.dir, fmt.Sprintf("controller-%d.log", c.starts))
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	args := []string{"--kubeconfig", c.kubeconfig, "--leader-elect=false", "--gc-grace", o.grace.String(),
		"--metrics-bind-address", metrics, "--health-probe-bind-address", health}
	if o.gcWorkers > 0 {
		args = append(args, "--gc-workers", strconv.Itoa(o.gcWorkers))
	}
	if o.qps > 0 {
		args = append(args, "--kube-api-qps", strconv.FormatFloat(o.qps, 'g', -1, 64), "--kube-api-burst", strconv.Itoa(int(2*o.qps)))
	}
	cmd := exec.Command(c.binary, args...)
	cmd.Stdout, cmd.Stderr = log, log
	p := &controllerProc{cmd: cmd, done: make(chan error, 1), log: logPath, metrics: metrics, health: health, started: time.Now()}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("failed to start the controller: %w", err)
	}
	go func() { p.done <- cmd.Wait(); _ = log.Close() }()
	c.controller = p
	return nil
}

// stopController ends the controller (SIGTERM), if one runs.
func (c *cluster) stopController() error {
	p := c.controller
	if p == nil {
		return nil
	}
	c.controller = nil
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-p.done:
		if err != nil {
			return fmt.Errorf("controller: %w (log: %s)", err, p.log)
		}
		return nil
	case <-time.After(15 * time.Second):
		return errors.Join(fmt.Errorf("the controller did not stop within 15s"), p.cmd.Process.Kill())
	}
}

// waitReady waits until the controller's /readyz answers 200 (its caches have synced).
func (p *controllerProc) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get("http://" + p.health + "/readyz")
		if err == nil {
			_ = resp.Body.Close() // only the status matters
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-p.done:
			return fmt.Errorf("the controller exited: %v (log: %s)", err, p.log)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the controller was not ready within %s (log: %s)", timeout, p.log)
		}
	}
}

// stop ends the controller (SIGTERM) and the control plane, and removes the work directory
// unless keep.
func (c *cluster) stop(keep bool) error {
	errs := []error{c.stopController()}
	if c.plane != nil {
		errs = append(errs, c.plane.Stop())
	}
	if keep {
		fmt.Fprintln(os.Stderr, "bench: work directory kept:", c.dir)
	} else {
		errs = append(errs, os.RemoveAll(c.dir))
	}
	return errors.Join(errs...)
}
