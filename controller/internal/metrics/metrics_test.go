package metrics_test

import (
	"math/big"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/controller/internal/metrics"
	"github.com/netpool/netpool/internal/gcpolicy"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	huge := new(big.Int).Lsh(big.NewInt(1), 64)
	m.SetPool("v6", huge, 3, new(big.Int).Sub(huge, big.NewInt(3)))
	m.SetPool("v4", big.NewInt(254), 4, big.NewInt(250))
	m.Released(gcpolicy.ReasonPodDeleted, false)
	m.Released(gcpolicy.ReasonPodDeleted, true)
	if v := ctrltest.Value(t, m.PoolCapacity.WithLabelValues("v6")); v != 18446744073709551616 {
		t.Errorf("IPv6 capacity %v", v)
	}
	if v := ctrltest.Value(t, m.PoolFree.WithLabelValues("v4")); v != 250 {
		t.Errorf("free %v", v)
	}
	if v := ctrltest.Value(t, m.Releases.WithLabelValues(gcpolicy.ReasonPodDeleted, "true")); v != 1 {
		t.Errorf("dry-run releases %v", v)
	}
	m.ForgetPool("v4")
	if n := ctrltest.Series(m.PoolAllocated); n != 1 {
		t.Errorf("%d allocated series after forgetting v4, want 1", n)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "netpool_") || f.GetHelp() == "" {
			t.Errorf("metric %s lacks the netpool_ prefix or help", f.GetName())
		}
	}
	if _, err := metrics.New(reg); err == nil || !strings.Contains(err.Error(), "failed to register the controller's metrics") {
		t.Fatalf("registering twice: %v", err)
	}
}
