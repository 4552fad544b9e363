package agent

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDashboardAndAlertsReadAgentMetrics: every netpool_agent_ series the Grafana dashboard and the
// PrometheusRule read is one the agent exports, and both show each agent metric.
func TestDashboardAndAlertsReadAgentMetrics(t *testing.T) {
	m := newMetrics()
	m.observe("ADD", 0, 0)
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{}
	for _, f := range families {
		ours[f.GetName()] = true
	}
	name := regexp.MustCompile(`\bnetpool_agent_[a-z_]+`)
	for _, file := range []string{"components/grafana-dashboard/netpool.json", "components/prometheusrule/prometheusrule.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "deploy", file))
		if err != nil {
			t.Fatal(err)
		}
		used := map[string]bool{}
		for _, n := range name.FindAllString(string(data), -1) {
			base := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suffix); ok && ours[b] {
					base = b
				}
			}
			used[base] = true
			if !ours[base] {
				t.Errorf("deploy/%s reads %s, which the agent does not export", file, n)
			}
		}
		for n := range ours {
			if !used[n] {
				t.Errorf("deploy/%s reads no %s", file, n)
			}
		}
	}
}
