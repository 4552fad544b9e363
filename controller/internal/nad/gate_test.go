package nad

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/netpool/netpool/controller/internal/ctrltest"
)

// TestNADCRDServed covers the discovery answers (served, the API server unreachable) and the
// gate's readiness when its setup fails.
func TestNADCRDServed(t *testing.T) {
	env := ctrltest.SharedEnv(t)
	d, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := nadCRDServed(d); err != nil {
		t.Fatalf("the suite's API server serves the NAD CRD: %v", err)
	}
	broken, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := nadCRDServed(broken); err == nil || !strings.Contains(err.Error(), "failed to discover k8s.cni.cncf.io/v1") {
		t.Fatalf("an unreachable API server: %v", err)
	}
	g := &Gate{discovery: broken, setup: func(context.Context) error { return nil }}
	if err := g.Checker()(nil); !errors.Is(err, errNADCRDMissing) {
		t.Fatalf("readiness before the CRD: %v", err)
	}
	g.discovery = d
	g.setup = func(context.Context) error { return ctrltest.ErrExpected }
	if err := g.try(context.Background()); !errors.Is(err, ctrltest.ErrExpected) {
		t.Fatalf("a failing setup: %v", err)
	}
	if err := g.Checker()(nil); err == nil {
		t.Fatal("ready though the setup failed")
	}
}
