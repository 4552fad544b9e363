package egressrouter

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	networkv1 "github.com/netpool/netpool/crds/network/v1"
	"github.com/netpool/netpool/test/poll"
)

// TestEgressRouterPoolAdmission: a pool's namespaceSelector (and that of a pool whose addresses
// another overlaps) applies to a router as to a pod. A router in a namespace the pool does not
// admit is Degraded PoolNotAdmitted, claims nothing and gets no pod, whether it asks for an
// address or for the pool to allocate one; labelling the namespace admits it at once.
func TestEgressRouterPoolAdmission(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	startEgressManager(t, f)
	teamB := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: f.NS + "-team-b"},
		Spec: ipamv1.IPPoolSpec{Range: "192.168.52.0/29", Gateway: "192.168.52.1", NetworkName: "ext-b",
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}}}
	f.Create(teamB)
	// An open pool of the same network whose window holds team-b's: team-b's rule governs it too.
	open := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: f.NS + "-open"},
		Spec: ipamv1.IPPoolSpec{Range: "192.168.52.0/28", Gateway: "192.168.52.1", NetworkName: "ext-b"}}
	f.Create(open)

	routers := map[string]func(r *networkv1.EgressRouter){
		"allocating": func(r *networkv1.EgressRouter) { r.Spec.Addresses, r.Spec.Pool = nil, teamB.Name },
		"static": func(r *networkv1.EgressRouter) {
			r.Spec.Addresses = []networkv1.EgressRouterAddress{{IP: "192.168.52.3/29", Gateway: "192.168.52.1"}}
			r.Spec.Pool = teamB.Name
		},
		"overlapping": func(r *networkv1.EgressRouter) {
			r.Spec.Addresses = []networkv1.EgressRouterAddress{{IP: "192.168.52.4/28", Gateway: "192.168.52.1"}}
			r.Spec.Pool = open.Name
		},
	}
	for name, set := range routers {
		r := f.TestRouter(name)
		r.Spec.Redirect.RedirectRules = r.Spec.Redirect.RedirectRules[1:]
		set(r)
		f.Create(r)
	}
	for name := range routers {
		got := f.WaitCondition(name, networkv1.EgressRouterDegraded, metav1.ConditionTrue, networkv1.ReasonPoolNotAdmitted)
		msg := findCondition(got, networkv1.EgressRouterDegraded).Message
		if !strings.Contains(msg, "IPPool "+teamB.Name+" does not admit namespace "+f.NS) {
			t.Errorf("router %s: message %q, want it to name pool %s and namespace %s", name, msg, teamB.Name, f.NS)
		}
		if name == "overlapping" && !strings.Contains(msg, "IPPool "+open.Name+" overlaps IPPool "+teamB.Name) {
			t.Errorf("router %s: message %q, want it to say that %s overlaps %s", name, msg, open.Name, teamB.Name)
		}
		if c := findCondition(got, networkv1.EgressRouterAvailable); c.Status != metav1.ConditionFalse || c.Reason != networkv1.ReasonPoolNotAdmitted {
			t.Errorf("router %s: Available %+v", name, c)
		}
		if len(f.EventsFor(got.UID, corev1.EventTypeWarning, networkv1.ReasonPoolNotAdmitted)) == 0 {
			t.Errorf("router %s: no %s event", name, networkv1.ReasonPoolNotAdmitted)
		}
		f.MustNotExist(&corev1.Pod{}, name)
		var claims ipamv1.OverlappingRangeIPReservationList
		if err := f.C.List(f.Ctx, &claims, client.MatchingLabels{networkv1.RouterUIDLabel: string(got.UID)}); err != nil {
			t.Fatal(err)
		}
		if len(claims.Items) != 0 {
			t.Errorf("router %s, not admitted, holds %d reservations: %+v", name, len(claims.Items), claims.Items)
		}
	}

	// The namespace joins team b: its routers are admitted without waiting for a retry.
	ns := &corev1.Namespace{}
	if err := f.C.Get(f.Ctx, client.ObjectKey{Name: f.NS}, ns); err != nil {
		t.Fatal(err)
	}
	base := ns.DeepCopy()
	ns.Labels = map[string]string{"team": "b"}
	if err := f.C.Patch(f.Ctx, ns, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	for name := range routers {
		got := f.WaitCondition(name, networkv1.EgressRouterDegraded, metav1.ConditionFalse, networkv1.ReasonAsExpected)
		f.WaitPod(name, "")
		poll.Eventually(t, ctrltest.EgressTimeout, fmt.Sprintf("router %s's claim", name), func() error {
			var claims ipamv1.OverlappingRangeIPReservationList
			if err := f.C.List(f.Ctx, &claims, client.MatchingLabels{networkv1.RouterUIDLabel: string(got.UID)}); err != nil {
				return err
			}
			if len(claims.Items) != 1 {
				return fmt.Errorf("%d reservations", len(claims.Items))
			}
			return nil
		})
	}
}
