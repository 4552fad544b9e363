package egressrouter

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	networkv1 "github.com/netpool/netpool/crds/network/v1"
)

// TestEgressRouterColumns writes the status the reconciler computes for each situation and reads
// the router back as kubectl does (a Table from the API server, with the CRD's printer columns):
// Available, Progressing and Degraded show, and Reason is the reason that matters, never
// AsExpected while the router is not Available.
func TestEgressRouterColumns(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	r := statusRouter()
	r.Namespace, r.Name = f.NS, "columns"
	r.Spec.Pool = "egress"
	r.ResourceVersion, r.UID = "", ""
	f.Create(r)
	problem := &egressProblem{networkv1.ReasonPoolNotAdmitted, "IPPool egress does not admit namespace " + f.NS}
	for _, tc := range []struct {
		name  string
		obs   egressObservation
		cells map[string]string // column -> cell
	}{
		{"no pod yet", egressObservation{},
			map[string]string{"Available": "False", "Progressing": "True", "Degraded": "False", "Reason": networkv1.ReasonCreatingPod}},
		{"pod not Ready", egressObservation{pod: notReadyPod()},
			map[string]string{"Available": "False", "Progressing": "True", "Reason": networkv1.ReasonCreatingPod,
				"Message": "waiting for pod columns to be Ready with its addresses"}},
		{"replacing", egressObservation{replacing: true},
			map[string]string{"Available": "False", "Progressing": "True", "Reason": networkv1.ReasonReplacingPod}},
		{"Available, dual stack", egressObservation{pod: readyPod(columnsOnNet1(f.NS)), addresses: r.Spec.Addresses},
			map[string]string{"Address": "192.168.12.99/24", "Second Address": "fd00:12::99/64", "Available": "True",
				"Progressing": "False", "Degraded": "False", "Reason": networkv1.ReasonRouterReady}},
		{"degraded, no pod", egressObservation{problem: problem},
			map[string]string{"Available": "False", "Progressing": "False", "Degraded": "True", "Reason": networkv1.ReasonPoolNotAdmitted,
				"Message": problem.message, "Pool": "egress"}},
		{"degraded while the pod still serves", egressObservation{problem: problem, pod: readyPod(columnsOnNet1(f.NS)), addresses: r.Spec.Addresses},
			map[string]string{"Available": "True", "Degraded": "True", "Reason": networkv1.ReasonPoolNotAdmitted}},
		{"the pod failed", egressObservation{podFailed: true, replacing: true},
			map[string]string{"Available": "False", "Degraded": "True", "Reason": networkv1.ReasonPodFailed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := f.GetRouter(r.Name)
			base := got.DeepCopy()
			setEgressConditions(got, tc.obs)
			if err := f.C.Status().Patch(f.Ctx, got, client.MergeFrom(base)); err != nil {
				t.Fatal(err)
			}
			row := readTableRow(t, f, r.Name)
			for col, want := range tc.cells {
				if row[col] != want {
					t.Errorf("column %s = %q, want %q (row %v)", col, row[col], want, row)
				}
			}
			if row["Available"] != "True" && row["Reason"] == networkv1.ReasonAsExpected {
				t.Errorf("Reason AsExpected while Available is %s", row["Available"])
			}
		})
	}

	// A status written in the order of earlier releases (Available first) is put in order.
	got := f.GetRouter(r.Name)
	slices.Reverse(got.Status.Conditions)
	setEgressConditions(got, egressObservation{})
	var types []string
	for _, c := range got.Status.Conditions {
		types = append(types, c.Type)
	}
	if !slices.Equal(types, egressConditionOrder) {
		t.Errorf("conditions in order %v, want %v", types, egressConditionOrder)
	}
}

// notReadyPod is the router's pod, created and not Ready yet.
func notReadyPod() *corev1.Pod {
	p := readyPod("")
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	return p
}

// columnsOnNet1 is the network-status of router "columns" of namespace ns with both addresses.
func columnsOnNet1(ns string) string {
	return fmt.Sprintf(`[{"name":"%s/columns","interface":"net1","ips":["192.168.12.99","fd00:12::99"]}]`, ns)
}

// readTableRow GETs the router as a Table, the way kubectl get asks for it with -o wide, and
// returns its row by column name.
func readTableRow(t *testing.T, f *ctrltest.Fixture, name string) map[string]string {
	ns := f.NS
	t.Helper()
	httpClient, err := rest.HTTPClientFor(f.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("%s/apis/%s/namespaces/%s/egressrouters/%s", strings.TrimSuffix(f.Env.Config.Host, "/"), networkv1.GroupVersion, ns, name)
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s as a Table: %s %v: %s", url, resp.Status, err, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatalf("decoding the Table: %v: %s", err, body)
	}
	if len(table.Rows) != 1 || len(table.Rows[0].Cells) != len(table.ColumnDefinitions) {
		t.Fatalf("Table with %d rows for %d columns: %s", len(table.Rows), len(table.ColumnDefinitions), body)
	}
	row := map[string]string{}
	for i, c := range table.ColumnDefinitions {
		if cell := table.Rows[0].Cells[i]; cell != nil {
			row[c.Name] = fmt.Sprint(cell)
		}
	}
	return row
}
