package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options of Start.
type Options struct {
	// Nodes is the number of nodes (at least 1).
	Nodes int
	// BinDir holds hack/cluster-binaries.sh's binaries; AssetsDir hack/envtest-binaries.sh's
	// kube-apiserver and etcd.
	BinDir, AssetsDir string
	// Root is the checkout (the images are built from it).
	Root string
	// ImageTag is the tag of the netpool image imported on every node.
	ImageTag string
	// Progress, when set, gets a line per step with the time since Start began.
	Progress io.Writer
	// GCGrace, when set, replaces the controller's --gc-grace (deploy/ says 2m) when netpool is
	// installed, so that tests of what GC releases wait less; make cluster leaves it unset.
	GCGrace time.Duration
}

// Cluster is a running cluster. Stop it, whatever Start returned.
type Cluster struct {
	BinDir, AssetsDir string
	// Kubeconfig is a cluster-admin kubeconfig (system:masters); Config and Client are the same.
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface
	Nodes      []*Node
	// ImageTag is the netpool image's tag on the nodes.
	ImageTag string

	opts                                          Options
	start                                         time.Time
	dir, logDir                                   string
	pki                                           *pki
	etcd, apiserver, controllerManager, scheduler *proc
	sysctls                                       map[string]string
	lock                                          *os.File
	before                                        *Footprint
}

func (c *Cluster) say(format string, args ...any) {
	if c.opts.Progress != nil {
		fmt.Fprintf(c.opts.Progress, "cluster: %s (%s)\n", fmt.Sprintf(format, args...), time.Since(c.start).Round(100*time.Millisecond))
	}
}

// Start brings a cluster up: the host's bridges, the control plane, the nodes with the images
// imported, and waits until every node is Ready. On error the returned cluster is whatever was
// started; Stop it.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	c := &Cluster{BinDir: o.BinDir, AssetsDir: o.AssetsDir, ImageTag: o.ImageTag, opts: o, start: time.Now()}
	if o.Nodes < 1 {
		return c, errors.New("a cluster needs at least one node")
	}
	if os.Geteuid() != 0 {
		return c, errors.New("a real cluster needs root (network and mount namespaces, cgroups, bridges)")
	}
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return c, err
	}
	c.say("waiting for %s (one cluster per machine)", lockPath)
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		_ = lock.Close()
		return c, err
	}
	c.lock = lock
	// Whatever a cluster killed before it could stop left behind is not a live cluster's: the lock
	// is free.
	if err := reap(); err != nil {
		return c, fmt.Errorf("cleaning up after an earlier cluster: %w", err)
	}
	if c.before, err = TakeFootprint(); err != nil {
		return c, err
	}
	if c.sysctls, err = readSysctls(savedSysctls); err != nil {
		return c, err
	}
	if err := recordSysctls(c.sysctls); err != nil {
		return c, err
	}
	if c.dir, err = os.MkdirTemp("", "netpool-cluster-"); err != nil {
		return c, err
	}
	c.logDir = filepath.Join(c.dir, "logs")
	if err := os.MkdirAll(c.logDir, 0o755); err != nil {
		return c, err
	}
	if err := c.up(ctx); err != nil {
		return c, err
	}
	c.say("ready: %d nodes", len(c.Nodes))
	return c, nil
}

func (c *Cluster) up(ctx context.Context) error {
	o := c.opts
	var err error
	images := make(chan error, 1)
	var archives []string
	imageDir := filepath.Join(c.dir, "images")
	if err := os.MkdirAll(imageDir, 0o755); err != nil {
		return err
	}
	go func() { // the image build overlaps the control plane's start
		var err error
		archives, err = buildImages(o.Root, imageDir, o.ImageTag)
		images <- err
	}()
	if err := c.hostNetwork(); err != nil {
		return err
	}
	if c.pki, err = newPKI(c.dir, []net.IP{net.ParseIP(hostAddr), net.ParseIP(apiServiceIP), net.ParseIP("127.0.0.1")}, identities(o.Nodes)); err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.dir, "admin.kubeconfig")
	if err := c.pki.kubeconfig(c.Kubeconfig, fmt.Sprintf("https://%s:%d", hostAddr, apiPort), adminUser); err != nil {
		return err
	}
	if err := c.startEtcd(); err != nil {
		return err
	}
	if err := c.startAPIServer(); err != nil {
		return err
	}
	if err := c.client(); err != nil {
		return err
	}
	if err := c.waitAPIServer(ctx); err != nil {
		return err
	}
	c.say("kube-apiserver ready")
	if err := c.bootstrapRBAC(ctx); err != nil {
		return err
	}
	if err := c.startControllers(); err != nil {
		return err
	}
	for i := 1; i <= o.Nodes; i++ {
		n := &Node{Name: nodeName(i), Addr: nodeAddr(i), PodCIDR: nodePodCIDR(i), index: i, dir: filepath.Join(c.dir, nodeName(i))}
		c.Nodes = append(c.Nodes, n)
		if err := makeCgroupRoot(n.Name); err != nil {
			return err
		}
		if err := n.startHolder(c.logDir); err != nil {
			return err
		}
	}
	for _, n := range c.Nodes {
		if err := n.setupNetwork(c.Nodes); err != nil {
			return err
		}
		if err := n.writeNodeFiles(c); err != nil {
			return err
		}
		if err := n.startDaemons(c); err != nil {
			return err
		}
	}
	c.say("nodes started; waiting for the images")
	if err := <-images; err != nil {
		return err
	}
	for _, n := range c.Nodes {
		if err := n.importImages(filepath.Join(c.BinDir, "ctr"), archives); err != nil {
			return err
		}
	}
	c.say("images imported on every node")
	return c.waitNodesReady(ctx)
}

func (c *Cluster) client() error {
	ca, err := os.ReadFile(c.pki.caFile)
	if err != nil {
		return err
	}
	c.Config = &rest.Config{
		Host:            fmt.Sprintf("https://%s:%d", hostAddr, apiPort),
		BearerToken:     c.pki.tokens[adminUser],
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		QPS:             50,
		Burst:           100,
	}
	c.Client, err = kubernetes.NewForConfig(c.Config)
	return err
}

// daemons are every process of the cluster, for a check that none has exited.
func (c *Cluster) daemons() []*proc {
	ps := []*proc{c.etcd, c.apiserver, c.controllerManager, c.scheduler}
	for _, n := range c.Nodes {
		ps = append(ps, n.holder, n.containerd, n.kubelet, n.proxy)
	}
	var out []*proc
	for _, p := range ps {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// Check returns an error naming the first daemon that has exited, with the end of its log.
func (c *Cluster) Check() error {
	for _, p := range c.daemons() {
		if done, err := p.exited(); done {
			return fmt.Errorf("%s exited (%v); the end of its log:\n%s", p.name, err, p.tail())
		}
	}
	return nil
}

// wait polls check every 100 ms until it returns nil, ctx ends or a daemon exits.
func (c *Cluster) wait(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if derr := c.Check(); derr != nil {
			return fmt.Errorf("waiting for %s: %w", what, derr)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: not within %s: %w", what, timeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) waitAPIServer(ctx context.Context) error {
	return c.wait(ctx, 2*time.Minute, "kube-apiserver /readyz", func(ctx context.Context) error {
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%w: %s", err, body)
		}
		return nil
	})
}

func (c *Cluster) waitNodesReady(ctx context.Context) error {
	err := c.wait(ctx, 3*time.Minute, "every node Ready", func(ctx context.Context) error {
		for _, n := range c.Nodes {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !nodeReady(node) {
				return fmt.Errorf("%s is not Ready: %v", n.Name, node.Status.Conditions)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Pods need their namespace's ServiceAccount, which the controller-manager makes.
	return c.wait(ctx, 2*time.Minute, "the default ServiceAccount", func(ctx context.Context) error {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Dir is the cluster's state directory (configuration, logs), removed by Stop.
func (c *Cluster) Dir() string { return c.dir }

// LogDir holds one log per daemon.
func (c *Cluster) LogDir() string { return c.logDir }

// Node returns the node called name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func waitFile(path string, p *proc) error {
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if done, err := p.exited(); done {
			return fmt.Errorf("%s exited (%v) before %s existed:\n%s", p.name, err, path, p.tail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not create %s within a minute:\n%s", p.name, path, p.tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
