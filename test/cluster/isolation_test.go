package cluster_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/scheme"
)

// TestNodeIsolation: the agent on node 1, with the token the kubelet mounted into its pod, cannot
// update or delete node 2's reservation (the ValidatingAdmissionPolicy refuses, naming both
// nodes), and can its own. The writes are dry runs, which admission judges like real ones.
func TestNodeIsolation(t *testing.T) {
	c := need(t)
	if len(c.Nodes) < 2 {
		t.Fatal("needs two nodes")
	}
	ctx := context.Background()
	cl := kubeClient(t, c)
	ns := testNamespace(t, c, nil)
	applyNAD(t, c, ns, "storage", storageNAD("storage-iso", "192.168.24.0/24", "192.168.24.1"))
	nets := map[string]string{"k8s.v1.cni.cncf.io/networks": "storage"}
	n1, n2 := c.Nodes[0], c.Nodes[1]
	createRunning(t, c, serverPod(ns, "one", n1.Name, nets))
	createRunning(t, c, serverPod(ns, "two", n2.Name, nets))
	own, other := onlyReservation(t, cl, ns, "one"), onlyReservation(t, cl, ns, "two")

	// The token as the agent's process reads it, from the projected volume kubelet wrote.
	agent := agentPod(t, c, n1.Name)
	token, err := n1.Exec("sh", "-c", "cat /var/lib/kubelet/pods/"+string(agent.UID)+"/volumes/kubernetes.io~projected/*/token")
	if err != nil {
		t.Fatalf("reading the agent's token on %s: %v", n1.Name, err)
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.BearerToken = strings.TrimSpace(token)
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	asAgent, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	dry := client.DryRunAll
	update := func(r *ipamv1.OverlappingRangeIPReservation) error {
		r = r.DeepCopy()
		if r.Annotations == nil {
			r.Annotations = map[string]string{}
		}
		r.Annotations["netpool.io/test"] = "isolation"
		return asAgent.Update(ctx, r, dry)
	}
	for _, tc := range []struct {
		what string
		do   func() error
	}{
		{"update", func() error { return update(&other) }},
		{"delete", func() error { return asAgent.Delete(ctx, &other, dry) }},
	} {
		err := tc.do()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "node "+n1.Name+" may not "+tc.what) || !strings.Contains(err.Error(), "of node "+n2.Name) {
			t.Errorf("%s of %s's reservation with %s's agent token: %v, want the policy's refusal", tc.what, n2.Name, n1.Name, err)
		}
	}
	if err := update(&own); err != nil {
		t.Errorf("update of its own reservation: %v", err)
	}
	if err := asAgent.Delete(ctx, &own, dry); err != nil {
		t.Errorf("delete of its own reservation: %v", err)
	}
}

func onlyReservation(t *testing.T, cl client.Client, ns, pod string) ipamv1.OverlappingRangeIPReservation {
	t.Helper()
	rs, err := reservationsOf(context.Background(), cl, ns, pod)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 {
		t.Fatalf("pod %s/%s: %d reservations, want 1", ns, pod, len(rs))
	}
	return rs[0]
}
