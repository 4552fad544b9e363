package benchenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/netpool/netpool/internal/scheme"
	"github.com/netpool/netpool/test/bench/benchproc"
)

// nadCRD is the NetworkAttachmentDefinition CRD as Multus installs it, the file test/envtest's
// InstallNADCRD installs (test/envtest/nad.go).
const nadCRD = "test/envtest/testdata/nad-crd.yaml"

// Options are what the benches' control planes differ in.
type Options struct {
	// NAD installs Multus' NetworkAttachmentDefinition CRD, which the controller waits for.
	NAD bool
	// CRDDirs are directories (or files) of CRDs installed beside crds/bases, relative to the
	// root unless absolute.
	CRDDirs []string
	// QPS and Burst are the admin client's rate limits: high, so that the client's own limiter
	// does not set the figures a bench measures.
	QPS   float32
	Burst int
	// Configure, when set, adjusts the environment before it starts (the API server's and etcd's
	// flags).
	Configure func(*crenvtest.Environment)
}

// ControlPlane is a running kube-apiserver and etcd with netpool's CRDs.
type ControlPlane struct {
	Env    *crenvtest.Environment
	Config *rest.Config     // the admin's, with the Options' QPS and Burst
	Scheme *runtime.Scheme  // internal/scheme's kinds
	Client client.WithWatch // the admin's, without a cache
}

// Start starts kube-apiserver and etcd from the binaries hack/envtest-binaries.sh of root prints
// (built once, then cached), with the CRDs of root's crds/bases and o.CRDDirs. On error nothing it
// started is left running.
func Start(root string, o Options) (*ControlPlane, error) {
	assets, err := benchproc.Output(exec.Command("bash", filepath.Join(root, "hack", "envtest-binaries.sh")))
	if err != nil {
		return nil, fmt.Errorf("failed to get the envtest binaries: %w", err)
	}
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	dirs := []string{filepath.Join(root, "crds", "bases")}
	if o.NAD {
		dirs = append(dirs, filepath.Join(root, nadCRD))
	}
	for _, d := range o.CRDDirs {
		if !filepath.IsAbs(d) {
			d = filepath.Join(root, d)
		}
		dirs = append(dirs, d)
	}
	env := &crenvtest.Environment{CRDDirectoryPaths: dirs, ErrorIfCRDPathMissing: true, BinaryAssetsDirectory: assets, Scheme: s}
	if o.Configure != nil {
		o.Configure(env)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("failed to start envtest: %w", err), env.Stop())
	}
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	return &ControlPlane{Env: env, Config: cfg, Scheme: s, Client: c}, nil
}

// WriteKubeconfig writes the admin's kubeconfig to path, for the processes a bench starts.
func (p *ControlPlane) WriteKubeconfig(path string) error {
	return os.WriteFile(path, p.Env.KubeConfig, 0o600)
}

// Stop ends kube-apiserver and etcd.
func (p *ControlPlane) Stop() error { return p.Env.Stop() }
