package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/netpool/netpool/test/bench/benchenv"
	"github.com/netpool/netpool/test/bench/benchproc"
)

// The agent's identity, as deploy/base/agent-rbac.yaml makes it.
const (
	agentNamespace      = "netpool-system"
	agentServiceAccount = "netpool-agent"
)

// cluster is the control plane, the controller and the binaries of one run.
type cluster struct {
	root       string // the checkout
	dir        string // work directory: binaries, kubeconfig, logs
	plane      *benchenv.ControlPlane
	cfg        *rest.Config // the admin's
	client     client.Client
	kubeconfig string
	controller *exec.Cmd
	ctrlDone   chan error
	ctrlLog    string
	agentBin   string
}

// startCluster starts kube-apiserver and etcd sized for o.nodes watchers, with netpool's CRDs,
// the NAD CRD (the controller waits for it) and the bench's unwatched tiny CRD; with o.policy, the
// agent's namespace, RBAC and node-isolation policy from deploy/base, and with o.flowcontrol its
// priority level. On error the returned cluster, if any, must be stopped.
func startCluster(o options) (*cluster, error) {
	root, err := benchenv.Root()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "npscale")
	if err != nil {
		return nil, err
	}
	c := &cluster{root: root, dir: dir}
	if err := c.build(o.binDir); err != nil {
		return c, err
	}
	// Every hollow agent keeps its watches open and may have a request in flight: the defaults
	// (400 and 200) would turn a rollout into 429s on the bench rather than on the design.
	sized := func(env *crenvtest.Environment) {
		env.ControlPlane.GetAPIServer().Configure().
			Set("max-requests-inflight", strconv.Itoa(max(400, o.nodes))).
			Set("max-mutating-requests-inflight", strconv.Itoa(max(200, o.nodes/2)))
		env.ControlPlane.Etcd = &crenvtest.Etcd{}
		env.ControlPlane.Etcd.Configure().Set("quota-backend-bytes", strconv.FormatInt(8<<30, 10))
	}
	if c.plane, err = benchenv.Start(root, benchenv.Options{NAD: true, CRDDirs: []string{"test/bench/scale/testdata"},
		QPS: 5000, Burst: 10000, Configure: sized}); err != nil {
		return c, err
	}
	c.cfg, c.client = c.plane.Config, c.plane.Client
	c.kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := c.plane.WriteKubeconfig(c.kubeconfig); err != nil {
		return c, err
	}
	if o.policy {
		files := []string{"namespace.yaml", "agent-rbac.yaml", "agent-admission.yaml"}
		if o.flowcontrol {
			files = append(files, "agent-flowcontrol.yaml")
		}
		for _, f := range files {
			if err := c.apply(filepath.Join(root, "deploy", "base", f)); err != nil {
				return c, err
			}
		}
	} else if err := c.client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNamespace}}); err != nil {
		return c, err
	}
	return c, nil
}

// build compiles the controller and the agent into the work directory, or takes them from dir.
func (c *cluster) build(dir string) error {
	if dir == "" {
		dir = filepath.Join(c.dir, "bin")
		cmd := exec.Command("go", "build", "-trimpath", "-o", dir+"/", "./cmd/netpool-controller", "./cmd/netpool-agent")
		cmd.Dir = c.root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("failed to build the binaries: %w\n%s", err, out)
		}
	}
	c.agentBin = filepath.Join(dir, "netpool-agent")
	c.ctrlLog = filepath.Join(c.dir, "controller.log")
	return nil
}

// apply creates every object of a manifest file except DaemonSets (the agents are the bench's).
func (c *cluster) apply(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(o.Object) == 0 || o.GetKind() == "DaemonSet" {
			continue
		}
		if err := c.client.Create(context.Background(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: create %s %s: %w", path, o.GetKind(), o.GetName(), err)
		}
	}
}

// startController runs netpool-controller with its defaults but one replica, a GC grace longer than
// the run (hollow pods exist nowhere, and must not be collected), the given pool status interval
// and fan-out (below 0: the controller's default) and loopback listeners.
func (c *cluster) startController(statusInterval time.Duration, statusFanout float64) error {
	metrics, err := benchproc.FreeAddr()
	if err != nil {
		return err
	}
	health, err := benchproc.FreeAddr()
	if err != nil {
		return err
	}
	log, err := os.Create(c.ctrlLog)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(filepath.Dir(c.agentBin), "netpool-controller"), "--kubeconfig", c.kubeconfig,
		"--leader-elect=false", "--gc-grace=24h", "--pool-status-interval", statusInterval.String(),
		"--metrics-bind-address", metrics, "--health-probe-bind-address", health)
	if statusFanout >= 0 {
		cmd.Args = append(cmd.Args, "--pool-status-fanout", strconv.FormatFloat(statusFanout, 'g', -1, 64))
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("failed to start the controller: %w", err)
	}
	c.controller, c.ctrlDone = cmd, make(chan error, 1)
	go func() { c.ctrlDone <- cmd.Wait(); _ = log.Close() }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get("http://" + health + "/readyz")
		if err == nil {
			_ = resp.Body.Close() // only the status matters
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-c.ctrlDone:
			return fmt.Errorf("the controller exited: %v (log: %s)", err, c.ctrlLog)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the controller was not ready within 2m (log: %s)", c.ctrlLog)
		}
	}
}

// agentConfig returns the REST config a hollow agent of node uses: with the policy, a token of the
// agent's ServiceAccount bound to a pod on node (as the kubelet gives it), else the admin's.
func (c *cluster) agentConfig(ctx context.Context, o options, node string) (*rest.Config, error) {
	if !o.policy {
		return rest.CopyConfig(c.cfg), nil
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "netpool-agent-" + node, Namespace: agentNamespace},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: agentServiceAccount,
			Containers: []corev1.Container{{Name: "agent", Image: "netpool-agent"}}},
	}
	if err := c.client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if pod.UID == "" {
		if err := c.client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return nil, err
		}
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: agentServiceAccount, Namespace: agentNamespace}}
	hour := int64(24 * 3600)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour,
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}
	if err := c.client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return nil, fmt.Errorf("failed to request the token of %s: %w", node, err)
	}
	cfg := rest.AnonymousClientConfig(c.cfg)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}

// agentKubeconfig writes the kubeconfig of node's agent (agentConfig's identity) for a process, and
// returns its path.
func (c *cluster) agentKubeconfig(ctx context.Context, o options, node string) (string, error) {
	if !o.policy {
		return c.kubeconfig, nil // agentConfig's identity is then the admin's
	}
	cfg, err := c.agentConfig(ctx, o, node)
	if err != nil {
		return "", err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bench"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[node] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: node}
	kc.CurrentContext = "bench"
	path := filepath.Join(c.dir, node+".kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}

// processes returns the PIDs of the API server and etcd (children of this process), 0 for one not
// found.
func (c *cluster) processes() (apiserver, etcd int) {
	first := func(name string) int {
		if pids := benchproc.ChildrenNamed(os.Getpid(), name); len(pids) > 0 {
			return pids[0]
		}
		return 0
	}
	return first("kube-apiserver"), first("etcd")
}

// etcdURL is etcd's client URL, which also serves its /metrics.
func (c *cluster) etcdURL() string { return c.plane.Env.ControlPlane.Etcd.URL.String() }

// stop ends the controller and the control plane and removes the work directory unless keep.
func (c *cluster) stop(keep bool) error {
	var errs []error
	if c.controller != nil {
		if err := c.controller.Process.Signal(syscall.SIGTERM); err == nil {
			select {
			case <-c.ctrlDone:
			case <-time.After(15 * time.Second):
				errs = append(errs, errors.New("the controller did not stop within 15s"), c.controller.Process.Kill())
			}
		}
	}
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
