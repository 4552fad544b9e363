package controller

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/netpool/netpool/internal/scheme"
	"github.com/netpool/netpool/test/envtest"
)

// env is the kube-apiserver and etcd every envtest-backed test of the package shares: TestMain
// starts it once, with netpool's CRDs and Multus' NetworkAttachmentDefinition CRD installed. Those
// tests run one at a time (none calls t.Parallel) and each removes what it made.
var env *envtest.Env

// direct is a client of env's admin user with the controller's scheme and no cache: tests assert
// with it on what the API server holds.
var direct client.Client

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runSuite(m))
}

// runSuite starts env, runs the tests and stops env.
func runSuite(m *testing.M) int {
	tb := &suiteTB{}
	defer tb.runCleanups()
	if !startEnv(tb) {
		return 1
	}
	return m.Run()
}

// startEnv starts env in a goroutine of its own, which suiteTB.Fatalf ends as testing's Fatalf
// ends a test's; it reports whether env started.
func startEnv(tb *suiteTB) bool {
	started := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		env = envtest.Start(tb)
		installNADCRD(tb, env.Client)
		s, err := scheme.New()
		if err != nil {
			tb.Fatalf("building the scheme: %v", err)
		}
		if direct, err = client.New(env.Config, client.Options{Scheme: s}); err != nil {
			tb.Fatalf("creating the direct client: %v", err)
		}
		started = true
	}()
	<-done
	return started
}

// installNADCRD installs testdata/nad-crd.yaml and waits until it is established.
func installNADCRD(tb testing.TB, c client.Client) {
	data, err := os.ReadFile(filepath.Join("testdata", "nad-crd.yaml"))
	if err != nil {
		tb.Fatalf("reading the NAD CRD: %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		tb.Fatalf("decoding the NAD CRD: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Create(ctx, crd); err != nil {
		tb.Fatalf("creating the NAD CRD: %v", err)
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return false, err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		tb.Fatalf("waiting for the NAD CRD to be established: %v", err)
	}
}

// suiteTB lets TestMain call helpers that take a testing.TB (envtest.Start): Fatalf reports and
// ends the calling goroutine, and temporary directories and cleanups belong to the whole run.
// Methods it does not override are never called by those helpers (the embedded TB is nil).
type suiteTB struct {
	testing.TB
	cleanups []func()
	dirs     []string
}

func (s *suiteTB) Helper() {}

func (s *suiteTB) Logf(format string, args ...any) {
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}

func (s *suiteTB) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "controller suite: "+format+"\n", args...)
}

func (s *suiteTB) Fatalf(format string, args ...any) {
	s.Errorf(format, args...)
	runtime.Goexit()
}

func (s *suiteTB) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }

func (s *suiteTB) TempDir() string {
	dir, err := os.MkdirTemp("", "netpool-controller-suite-")
	if err != nil {
		s.Fatalf("creating a temporary directory: %v", err)
	}
	s.dirs = append(s.dirs, dir)
	return dir
}

// runCleanups runs the cleanups last-in first-out, then removes the temporary directories.
func (s *suiteTB) runCleanups() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
	for _, d := range s.dirs {
		if err := os.RemoveAll(d); err != nil {
			s.Errorf("removing %s: %v", d, err)
		}
	}
}
