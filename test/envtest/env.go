package envtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/scheme"
	"github.com/netpool/netpool/test/harness"
	"github.com/netpool/netpool/test/poll"
)

// servedTimeout bounds how long StartControlPlane waits for the netpool kinds to be served again
// after the apiserver answers its health check.
const servedTimeout = 30 * time.Second

// controlPlaneStartTimeout bounds each start of etcd and of kube-apiserver, the first and every
// restart (StartControlPlane).
const controlPlaneStartTimeout = 90 * time.Second

// Env is a running kube-apiserver and etcd with netpool's CRDs installed.
type Env struct {
	// Config is the REST config of the admin user (group system:masters).
	Config *rest.Config

	// Scheme holds the kinds of internal/scheme and apiextensions.k8s.io/v1.
	Scheme *runtime.Scheme

	// Client is a controller-runtime client of the admin user, with Scheme. It has no cache: every
	// read goes to the apiserver.
	Client client.Client

	// Kubeconfig is the path of a kubeconfig file for the admin user, in the test's temporary
	// directory. It stays valid across StopControlPlane and StartControlPlane.
	Kubeconfig string

	// CRDs are the CustomResourceDefinitions installed from crds/bases.
	CRDs []*apiextensionsv1.CustomResourceDefinition

	// StartDuration is how long Start took, from running hack/envtest-binaries.sh until the CRDs
	// were served.
	StartDuration time.Duration

	env *crenvtest.Environment

	// usersMu serialises AddUser: controller-runtime's certificate authority is not safe for
	// concurrent use, and tests sharing one Env ask for users in parallel.
	usersMu sync.Mutex

	mu sync.Mutex
	// down is set by StopControlPlane and cleared by StartControlPlane.
	down bool
	// stopped is set by Stop; the Env cannot be used after it.
	stopped bool
}

// Start starts kube-apiserver and etcd for the test, installs the CRDs from crds/bases and returns
// the running Env, which t.Cleanup stops. Etcd's data and the apiserver's certificates live in
// t.TempDir(). Start stops the test when anything fails.
//
// The apiserver's and etcd's own output is discarded unless KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT
// is "true" (envtest's switch).
func Start(t testing.TB) *Env {
	t.Helper()
	SkipShort(t)
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("finding the checkout: %v", err)
	}
	e, err := start(t.TempDir(), root, DefaultModule, crdDir(root))
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	t.Logf("envtest: kube-apiserver at %s started in %s", e.Config.Host, e.StartDuration.Round(time.Millisecond))
	return e
}

// SkipShort skips the test under go test -short (make unit): it needs a kube-apiserver and etcd.
// Start and Shared call it, so a test that needs an API server skips by asking for one.
func SkipShort(t testing.TB) {
	t.Helper()
	harness.SkipShort(t, "a kube-apiserver and etcd (envtest)")
}

// The tools modules under hack/ whose kube-apiserver and etcd Start and StartBare run.
const (
	// DefaultModule is the Kubernetes version the tests run (docs/envtest.md).
	DefaultModule = "envtest"
	// MinimumModule is the oldest Kubernetes netpool supports (README, docs/kubernetes-api.md).
	MinimumModule = "envtest-minimum"
)

// StartBare starts the kube-apiserver and etcd of the tools module hack/<module> with nothing
// installed: a cluster as an operator has it before netpool. t.Cleanup stops it.
func StartBare(t testing.TB, module string) *Env {
	t.Helper()
	SkipShort(t)
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("finding the checkout: %v", err)
	}
	e, err := start(t.TempDir(), root, module, "")
	if err != nil {
		t.Fatalf("starting envtest (%s): %v", module, err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	t.Logf("envtest: kube-apiserver (%s) at %s started in %s", module, e.Config.Host, e.StartDuration.Round(time.Millisecond))
	return e
}

// crdDir is where the checkout at root keeps the CRDs that Start installs.
func crdDir(root string) string { return filepath.Join(root, "crds", "bases") }

// start is Start without the testing.TB: dir holds etcd's data, the certificates and the admin
// kubeconfig; module names the binaries' tools module; crdDir is where the CRDs are read from
// (none when empty). On failure nothing is left running.
func start(dir, root, module, crdDir string) (*Env, error) {
	began := time.Now()
	assets, err := binaryAssets(root, module)
	if err != nil {
		return nil, err
	}
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	etcdDir := filepath.Join(dir, "etcd")
	certDir := filepath.Join(dir, "apiserver")
	for _, d := range []string{etcdDir, certDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("failed to create %s: %w", d, err)
		}
	}
	env := &crenvtest.Environment{
		// Fixed directories (rather than envtest's throw-away ones) are what let the control plane
		// restart with the same data, certificates and ports; see StartControlPlane.
		ControlPlane: crenvtest.ControlPlane{
			APIServer: &crenvtest.APIServer{Path: filepath.Join(assets, "kube-apiserver"), CertDir: certDir},
			Etcd:      &crenvtest.Etcd{Path: filepath.Join(assets, "etcd"), DataDir: etcdDir},
		},
		// envtest's default of 20 s per process start is too short on a loaded machine: at load
		// average 35 on 2 cores a restarted kube-apiserver took longer, and the test failed on
		// that rather than on what it tests.
		ControlPlaneStartTimeout: controlPlaneStartTimeout,
		Scheme:                   scheme,
		BinaryAssetsDirectory:    assets,
	}
	if crdDir != "" {
		env.CRDDirectoryPaths, env.ErrorIfCRDPathMissing = []string{crdDir}, true
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("failed to start kube-apiserver and etcd: %w", err), env.Stop())
	}
	e := &Env{Config: cfg, Scheme: scheme, CRDs: env.CRDs, env: env}
	if err := e.finishStart(dir); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	e.StartDuration = time.Since(began)
	return e, nil
}

// finishStart writes the admin kubeconfig and makes the admin client.
func (e *Env) finishStart(dir string) error {
	path := filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(path, e.env.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("failed to write the admin kubeconfig: %w", err)
	}
	e.Kubeconfig = path
	c, err := client.New(e.Config, client.Options{Scheme: e.Scheme})
	if err != nil {
		return fmt.Errorf("failed to create the admin client: %w", err)
	}
	e.Client = c
	return nil
}

// newScheme is the one scheme of netpool's kinds (internal/scheme) with apiextensions.k8s.io/v1,
// whose CRDs the Env installs.
func newScheme() (*runtime.Scheme, error) {
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("failed to build the scheme: %w", err)
	}
	return s, nil
}

// Stop stops the apiserver and etcd. t.Cleanup calls it; calling it again does nothing.
func (e *Env) Stop() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil
	}
	e.stopped = true
	if err := e.env.Stop(); err != nil {
		return fmt.Errorf("failed to stop kube-apiserver and etcd: %w", err)
	}
	return nil
}

// StopControlPlane stops the apiserver and then etcd, gracefully, keeping etcd's data, the
// certificates and the ports, so that StartControlPlane brings the same cluster back at the same
// URL. Until then every request fails to connect. Stopping a stopped control plane does nothing.
// envtest reserves its ports for two minutes (in its port cache, shared by every envtest process),
// so a longer stop risks another process taking them before StartControlPlane.
func (e *Env) StopControlPlane() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errStopped
	}
	if e.down {
		return nil
	}
	plane := &e.env.ControlPlane
	// A test may have killed the apiserver to simulate a crash; stopping what is already gone is
	// not an error, and etcd must be stopped either way.
	if err := plane.APIServer.Stop(); err != nil && !processGone(err) {
		return fmt.Errorf("failed to stop kube-apiserver: %w", err)
	}
	if err := plane.Etcd.Stop(); err != nil && !processGone(err) {
		return fmt.Errorf("failed to stop etcd: %w", err)
	}
	e.down = true
	return nil
}

// processGone reports whether a stop failed only because the process had already exited.
func processGone(err error) bool {
	return errors.Is(err, os.ErrProcessDone) || errors.Is(err, syscall.ESRCH) || strings.Contains(err.Error(), "no such process")
}

// StartControlPlane starts etcd and then the apiserver again after StopControlPlane, on the same
// ports, data directory and certificates, so that the admin client, Kubeconfig and every
// UserKubeconfig keep working. It returns once the netpool kinds are served again. Starting a
// running control plane does nothing.
func (e *Env) StartControlPlane() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errStopped
	}
	if !e.down {
		return nil
	}
	plane := &e.env.ControlPlane
	if err := plane.Etcd.Start(); err != nil {
		return fmt.Errorf("failed to restart etcd: %w", err)
	}
	plane.APIServer.EtcdURL = plane.Etcd.URL
	if err := plane.APIServer.Start(); err != nil {
		return errors.Join(fmt.Errorf("failed to restart kube-apiserver: %w", err), plane.Etcd.Stop())
	}
	e.down = false
	ctx, cancel := context.WithTimeout(context.Background(), servedTimeout)
	defer cancel()
	return waitServed(ctx, e.Client)
}

// errStopped is returned by StopControlPlane and StartControlPlane after Stop.
var errStopped = errors.New("envtest: the environment was stopped")

// waitServed polls until a List of every netpool kind succeeds: after a restart the apiserver is
// healthy before it serves the CRDs again.
func waitServed(ctx context.Context, c client.Client) error {
	lists := []client.ObjectList{
		&ipamv1.IPPoolList{}, &ipamv1.OverlappingRangeIPReservationList{}, &ipamv1.IPPoolSliceList{},
	}
	err := poll.Until(ctx, 100*time.Millisecond, func(ctx context.Context) error {
		for _, l := range lists {
			if err := c.List(ctx, l, client.Limit(1)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("netpool kinds not served after the restart: %w", err)
	}
	return nil
}

// UserKubeconfig returns the path of a kubeconfig file (in t.TempDir()) that authenticates as user
// with groups, by a client certificate that the apiserver trusts. The user has no permissions
// beyond those of system:authenticated until RBAC grants them, which is what RBAC tests need.
func (e *Env) UserKubeconfig(t testing.TB, user string, groups []string) string {
	t.Helper()
	path, err := e.userKubeconfig(t.TempDir(), user, groups)
	if err != nil {
		t.Fatalf("making a kubeconfig for %q: %v", user, err)
	}
	return path
}

// ServiceAccountKubeconfig is UserKubeconfig for the identity of the ServiceAccount namespace/name:
// user "system:serviceaccount:<namespace>:<name>" in groups "system:serviceaccounts" and
// "system:serviceaccounts:<namespace>", so RoleBindings whose subject is that ServiceAccount apply.
// It authenticates by certificate, not by token; the ServiceAccount object need not exist.
func (e *Env) ServiceAccountKubeconfig(t testing.TB, namespace, name string) string {
	t.Helper()
	user, groups := ServiceAccountUser(namespace, name)
	return e.UserKubeconfig(t, user, groups)
}

// ServiceAccountUser returns the user name and groups the apiserver gives the ServiceAccount
// namespace/name.
func ServiceAccountUser(namespace, name string) (string, []string) {
	return "system:serviceaccount:" + namespace + ":" + name,
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + namespace}
}

func (e *Env) userKubeconfig(dir, user string, groups []string) (string, error) {
	if user == "" {
		return "", errors.New("the user name is empty")
	}
	e.usersMu.Lock()
	u, err := e.env.AddUser(crenvtest.User{Name: user, Groups: groups}, &rest.Config{QPS: 1000, Burst: 2000})
	e.usersMu.Unlock()
	if err != nil {
		return "", fmt.Errorf("failed to add user %q: %w", user, err)
	}
	data, err := u.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("failed to render the kubeconfig of %q: %w", user, err)
	}
	path := filepath.Join(dir, fileName(user)+".kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("failed to write the kubeconfig of %q: %w", user, err)
	}
	return path, nil
}

// fileName turns a user name (which may hold ':' and '/') into a safe file name.
func fileName(user string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		default:
			return '_'
		}
	}, user)
}

// NewClient returns a client (with Scheme and no cache) that authenticates with the kubeconfig
// file at path, such as Kubeconfig or one from UserKubeconfig.
func (e *Env) NewClient(path string) (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("failed to load kubeconfig %s: %w", path, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: e.Scheme})
	if err != nil {
		return nil, fmt.Errorf("failed to create a client from %s: %w", path, err)
	}
	return c, nil
}
