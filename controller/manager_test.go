package controller

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/controller/internal/metrics"
	"github.com/netpool/netpool/test/poll"
)

func TestNewRejectsInvalidOptions(t *testing.T) {
	o := testOptions()
	o.GCWorkers = 0
	// The options are checked before anything is asked of the API server: none is needed.
	nowhere := &rest.Config{Host: "http://127.0.0.1:1"}
	if _, err := New(nowhere, o); err == nil || !strings.Contains(err.Error(), "--gc-workers 0") {
		t.Fatalf("New: %v", err)
	}
	if err := Run(context.Background(), nowhere, o); err == nil {
		t.Fatal("Run with invalid options succeeded")
	}
}

func TestNewFailsWhenItsMetricsAreTaken(t *testing.T) {
	env := ctrltest.SharedEnv(t)
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg); err != nil {
		t.Fatal(err)
	}
	o := testOptions()
	o.Registerer = reg
	if _, err := New(env.Config, o); err == nil || !strings.Contains(err.Error(), "failed to register") {
		t.Fatalf("New: %v", err)
	}
}

func TestNewFailsOnAnUnusableProbeAddress(t *testing.T) {
	env := ctrltest.SharedEnv(t)
	o := testOptions()
	o.HealthProbeBindAddress = "256.0.0.1:1"
	if _, err := New(env.Config, o); err == nil || !strings.Contains(err.Error(), "failed to create the controller manager") {
		t.Fatalf("New: %v", err)
	}
}

func TestRunReportsAManagerThatCannotStart(t *testing.T) {
	env := ctrltest.SharedEnv(t)
	o := testOptions()
	o.Registerer = prometheus.NewRegistry()
	o.MetricsBindAddress = "256.0.0.1:1"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Run(ctx, env.Config, o); err == nil || !strings.Contains(err.Error(), "failed to run the controller manager") {
		t.Fatalf("Run: %v", err)
	}
}

// TestManagerServesHealthReadinessAndMetrics is the one test whose manager registers its metrics
// with controller-runtime's registry, which /metrics serves.
func TestManagerServesHealthReadinessAndMetrics(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	f.Pool("served", "10.70.0.0/24", "")
	o := testOptions()
	o.HealthProbeBindAddress, o.MetricsBindAddress = freeAddr(t), freeAddr(t)
	o.Registerer = ctrlmetrics.Registry
	mustStartManager(t, nil, o)

	get := func(url string) (string, error) {
		resp, err := http.Get(url)
		if err != nil {
			return "", err
		}
		defer func() { _ = resp.Body.Close() }() // a read-only probe; the status says what matters
		body, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s: %s %s", url, resp.Status, body)
		}
		return string(body), err
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		poll.Eventually(t, 10*time.Second, path, func() error {
			_, err := get("http://" + o.HealthProbeBindAddress + path)
			return err
		})
	}
	poll.Eventually(t, 10*time.Second, "/metrics has the pool's gauges and controller-runtime's errors", func() error {
		body, err := get("http://" + o.MetricsBindAddress + "/metrics")
		if err != nil {
			return err
		}
		for _, want := range []string{`netpool_pool_capacity_addresses{pool="served"} 254`, "controller_runtime_reconcile_errors_total", "netpool_gc_sweeps_total"} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("no %q in /metrics", want)
			}
		}
		return nil
	})
}

func TestReadinessWaitsForTheCache(t *testing.T) {
	env := ctrltest.SharedEnv(t)
	o := testOptions()
	o.Registerer = prometheus.NewRegistry()
	mgr, err := New(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
	if err := cacheSynced(mgr)(req); err == nil || err.Error() != "the informer cache has not synced" {
		t.Fatalf("a manager that never started is ready: %v", err)
	}
}

// freeAddr returns a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
