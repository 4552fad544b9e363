package controller

import (
	"math/big"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netpool/netpool/internal/gcpolicy"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	huge := new(big.Int).Lsh(big.NewInt(1), 64)
	m.setPool("v6", huge, 3, new(big.Int).Sub(huge, big.NewInt(3)))
	m.setPool("v4", big.NewInt(254), 4, big.NewInt(250))
	m.released(gcpolicy.ReasonPodDeleted, false)
	m.released(gcpolicy.ReasonPodDeleted, true)
	if v := value(t, m.PoolCapacity.WithLabelValues("v6")); v != 18446744073709551616 {
		t.Errorf("IPv6 capacity %v", v)
	}
	if v := value(t, m.PoolFree.WithLabelValues("v4")); v != 250 {
		t.Errorf("free %v", v)
	}
	if v := value(t, m.Releases.WithLabelValues(gcpolicy.ReasonPodDeleted, "true")); v != 1 {
		t.Errorf("dry-run releases %v", v)
	}
	m.forgetPool("v4")
	if n := series(m.PoolAllocated); n != 1 {
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
	if _, err := NewMetrics(reg); err == nil || !strings.Contains(err.Error(), "failed to register the controller's metrics") {
		t.Fatalf("registering twice: %v", err)
	}
}
