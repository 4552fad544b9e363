package ippool

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

func mustParse(t *testing.T, p ipamv1.IPPool) *Pool {
	t.Helper()
	pp, err := Parse(&p)
	if err != nil {
		t.Fatal(err)
	}
	return pp
}

func poolOf(name, network, rng string, derived bool) ipamv1.IPPool {
	p := ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: ipamv1.IPPoolSpec{Range: rng, NetworkName: network}}
	if derived {
		p.Labels = map[string]string{ipamv1.DerivedLabel: ipamv1.DerivedLabelValue}
	}
	return p
}

func TestAdmitsNode(t *testing.T) {
	p := poolOf("p", "", "10.0.0.0/24", false)
	if err := AdmitsNode(&p, "n1", nil); err != nil {
		t.Fatalf("no nodeSelector: %v", err)
	}
	p.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "r1"}}
	if err := AdmitsNode(&p, "n1", map[string]string{"rack": "r1"}); err != nil {
		t.Fatalf("matching node: %v", err)
	}
	err := AdmitsNode(&p, "n2", map[string]string{"rack": "r2"})
	if want := `IPPool p does not admit node n2: its nodeSelector is "rack=r1"`; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	p.Spec.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "rack", Operator: "Near"}}}
	if err := AdmitsNode(&p, "n1", nil); err == nil || !strings.Contains(err.Error(), "IPPool p has an invalid nodeSelector") {
		t.Fatalf("invalid selector: %v", err)
	}
}

// The tenant-b case: an inline pool over an operator's pool that admits only team b.
func TestGoverningAndAdmit(t *testing.T) {
	tenantB := poolOf("tenant-b-pool", "corp", "10.95.0.0/28", false)
	tenantB.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
	racked := poolOf("racked", "corp", "10.95.0.0/24", false)
	racked.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "r1"}}
	deleting := poolOf("deleting", "corp", "10.95.0.0/24", false)
	deleting.DeletionTimestamp = &metav1.Time{}
	deleting.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "nobody"}}
	inline := mustParse(t, poolOf("corp-10.95.0.0-28", "corp", "10.95.0.0/28", true))
	peers := []ipamv1.IPPool{
		poolOf("corp-10.95.0.0-28", "corp", "10.95.0.0/28", true), // itself
		tenantB, racked, deleting,
		poolOf("other-network", "red", "10.95.0.0/28", false),
		poolOf("elsewhere", "corp", "10.96.0.0/28", false),
		poolOf("v6", "corp", "fd00::/120", false),
		{ObjectMeta: metav1.ObjectMeta{Name: "broken"}, Spec: ipamv1.IPPoolSpec{Range: "10.95.0.0/28", NetworkName: "corp", Gateway: "gw"}},
	}
	gov := Governing(inline, peers)
	var names []string
	for _, g := range gov {
		names = append(names, g.Name())
	}
	if got := strings.Join(names, " "); got != "corp-10.95.0.0-28 tenant-b-pool racked" {
		t.Fatalf("governing pools %s", got)
	}
	if !SelectsNamespaces(gov) || !SelectsNodes(gov) || SelectsNamespaces(gov[:1]) || SelectsNodes(gov[:1]) {
		t.Fatal("Selects* disagree with the pools' selectors")
	}
	tests := []struct {
		name    string
		subject Subject
		want    []string
	}{
		{name: "team b on rack r1", subject: Subject{Namespace: "b", NamespaceLabels: map[string]string{"team": "b"}, Node: "n1", NodeLabels: map[string]string{"rack": "r1"}}},
		{name: "team a", subject: Subject{Namespace: "a", NamespaceLabels: map[string]string{"team": "a"}, Node: "n1", NodeLabels: map[string]string{"rack": "r1"}},
			want: []string{`IPPool corp-10.95.0.0-28 overlaps IPPool tenant-b-pool (10.95.0.1-10.95.0.14), whose rules apply to its addresses too: IPPool tenant-b-pool does not admit namespace a: its namespaceSelector is "team=b"`}},
		{name: "team b on another rack", subject: Subject{Namespace: "b", NamespaceLabels: map[string]string{"team": "b"}, Node: "n2", NodeLabels: map[string]string{"rack": "r2"}},
			want: []string{`IPPool racked does not admit node n2: its nodeSelector is "rack=r1"`}},
		{name: "no node: the nodeSelector is not judged", subject: Subject{Namespace: "b", NamespaceLabels: map[string]string{"team": "b"}}},
		{name: "both refuse", subject: Subject{Namespace: "a", Node: "n2"},
			want: []string{"tenant-b-pool does not admit namespace a", "racked does not admit node n2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Admit(gov, tt.subject)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("admitted, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to contain %q", err, w)
				}
			}
		})
	}
}

// BenchmarkGoverning is the cost the agent pays on every ADD: the pool's rules over the other pools
// of its network (here 100, one of which overlaps).
func BenchmarkGoverning(b *testing.B) {
	var peers []ipamv1.IPPool
	for i := range 100 {
		peers = append(peers, poolOf(fmt.Sprintf("p%d", i), "corp", fmt.Sprintf("10.%d.0.0/16", i), false))
	}
	target, err := Parse(&ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "t"}, Spec: ipamv1.IPPoolSpec{Range: "10.50.0.0/24", NetworkName: "corp"}})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if got := Governing(target, peers); len(got) != 2 {
			b.Fatalf("%d governing pools", len(got))
		}
	}
}
