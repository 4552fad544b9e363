package metrics_test

import (
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netpool/netpool/controller/internal/metrics"
	"github.com/netpool/netpool/internal/gcpolicy"
)

// dashboardPanel is the part of a Grafana panel the test reads.
type dashboardPanel struct {
	ID      int    `json:"id"`
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// runtimeMetrics are the controller-runtime and client-go metrics the dashboard may read
// (TestManagerServesHealthReadinessAndMetrics shows /metrics serving them).
var runtimeMetrics = map[string]bool{
	"controller_runtime_reconcile_errors_total":        true,
	"controller_runtime_reconcile_time_seconds_bucket": true,
	"workqueue_depth":               true,
	"leader_election_master_status": true,
}

func TestGrafanaDashboardReadsOnlyMetricsThatExist(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "components", "grafana-dashboard", "netpool.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string           `json:"title"`
		UID    string           `json:"uid"`
		Panels []dashboardPanel `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.SetPool("p", big.NewInt(1), 0, big.NewInt(1))
	m.Released(gcpolicy.ReasonPodDeleted, false)
	m.SlicesReturned.WithLabelValues(gcpolicy.ReasonSliceEmpty).Inc()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{}
	for _, f := range families {
		ours[f.GetName()] = true
	}

	name := regexp.MustCompile(`\b(netpool|controller_runtime|workqueue|leader_election)_[a-z_]+`)
	ids, used := map[int]bool{}, map[string]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			for _, n := range name.FindAllString(target.Expr, -1) {
				used[n] = true
				if strings.HasPrefix(n, "netpool_agent_") {
					continue // the node agent's, checked by cni-plugin/agent's TestDashboardAndAlertsReadAgentMetrics
				}
				if !ours[n] && !runtimeMetrics[n] {
					t.Errorf("panel %q reads %s, which nothing exports", p.Title, n)
				}
			}
		}
	}
	for n := range ours {
		if !used[n] {
			t.Errorf("the dashboard shows no panel of %s", n)
		}
	}
	if dash.UID == "" || dash.Title == "" {
		t.Error("the dashboard has no uid or title")
	}
}
