package agent

import (
	"context"
	"testing"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/podowner"
	"github.com/netpool/netpool/test/envtest"
)

// testPersistentOwnerHoles attacks persistently owned reservations with node-b's pod-bound token
// under the shipped policy: no sequence of take-over, rewritten users and delete frees an address
// that node-a's pod uses, nor an idle owner's; only the controller's identity removes a user.
func testPersistentOwnerHoles(t *testing.T, env *envtest.Env, sh *shim, na *running, ca, cb client.Client) {
	ctx := context.Background()
	env.InstallIPAMClaimCRD(t)
	const network = "iso-holes"
	extra := `,"range":"10.84.3.0/24","allowPersistentIPs":true`
	// vm claims its address with its launcher pod on node-a and returns the reservation.
	vm := func(t *testing.T, name string) *ipamv1.OverlappingRangeIPReservation {
		t.Helper()
		claim := &ipamclaimsv1.IPAMClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + ".net1"},
			Spec: ipamclaimsv1.IPAMClaimSpec{Network: network, Interface: "net1"}}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "launcher-" + name, Annotations: map[string]string{
				podowner.NetworksAnnotation: `[{"name":"` + network + `","interface":"net1","ipam-claim-reference":"` + claim.Name + `"}]`}},
			Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "compute", Image: "virt-launcher"}}},
		}
		for _, o := range []client.Object{claim, pod} {
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := sh.call("ADD", name, "K8S_POD_NAMESPACE=default;K8S_POD_NAME="+pod.Name, netConf(network, na.socket, extra)); err != nil {
			t.Fatalf("ADD of %s on node-a: %v", name, err)
		}
		return claimReservation(t, env, claim.Name)
	}
	// takeOver makes r node-b's with node-b's token, every user kept: the one write a migration
	// target's node makes, and the first of the attacks below.
	takeOver := func(t *testing.T, r *ipamv1.OverlappingRangeIPReservation) *ipamv1.OverlappingRangeIPReservation {
		t.Helper()
		r = r.DeepCopy()
		r.Spec.Node, r.Labels[ipamv1.NodeLabel] = "node-b", "node-b"
		if err := cb.Update(ctx, r); err != nil {
			t.Fatalf("node-b taking over %s with every user kept: %v", r.Name, err)
		}
		return r
	}
	fakeUser := ipamv1.ReservationUser{ContainerID: "fake", IfName: "net1", PodRef: "default/launcher-fake", Node: "node-b"}

	t.Run("take-over, users removed, delete: the address of node-a's pod stays", func(t *testing.T) {
		r := takeOver(t, vm(t, "vm-h"))
		nodeAUser := r.Spec.Users[0]
		dropMsg := "node node-b may not drop or change the users of other nodes of reservation " + r.Name + " (vm-h on node node-a)"
		// The second write: node-a's pod's user removed, so that a delete rule that trusted
		// spec.users would pass. Then the third, the delete.
		w := claimReservation(t, env, "vm-h.net1")
		w.Spec.Users, w.Spec.ContainerID = nil, "fake"
		wantDenied(t, cb.Update(ctx, w), dropMsg)
		wantDenied(t, cb.Delete(ctx, claimReservation(t, env, "vm-h.net1")),
			"node node-b may not delete reservation "+r.Name+": its address belongs to IPAMClaim default/vm-h.net1")
		for _, users := range [][]ipamv1.ReservationUser{
			{{ContainerID: nodeAUser.ContainerID, IfName: nodeAUser.IfName, PodRef: "default/elsewhere", Node: "node-a"}},
			{{ContainerID: nodeAUser.ContainerID, IfName: nodeAUser.IfName, PodRef: nodeAUser.PodRef, Node: "node-b"}},
		} {
			w := claimReservation(t, env, "vm-h.net1")
			w.Spec.Users = users
			wantDenied(t, cb.Update(ctx, w), dropMsg)
		}
		if got := claimReservation(t, env, "vm-h.net1"); got.UID != r.UID || !hasUserOn(got, "vm-h", "node-a") {
			t.Fatalf("after the attack the reservation is %s with users %+v, want %s still listing node-a's pod", got.UID, got.Spec.Users, r.UID)
		}
	})

	t.Run("the fake-user detour: a user of node-b's own does not let it delete", func(t *testing.T) {
		r := takeOver(t, vm(t, "vm-f"))
		// In place of node-a's user: denied, as any drop of another node's user.
		w := claimReservation(t, env, "vm-f.net1")
		w.Spec.Users = []ipamv1.ReservationUser{fakeUser}
		wantDenied(t, cb.Update(ctx, w), "node node-b may not drop or change the users of other nodes of reservation "+r.Name+" (vm-f on node node-a)")
		// Next to it: node-b's own entry to add, and still no delete.
		w = claimReservation(t, env, "vm-f.net1")
		w.Spec.Users = append(w.Spec.Users, fakeUser)
		if err := cb.Update(ctx, w); err != nil {
			t.Fatalf("node-b adding a user of its own: %v", err)
		}
		wantDenied(t, cb.Delete(ctx, claimReservation(t, env, "vm-f.net1")), "node node-b may not delete reservation "+r.Name)
		got := claimReservation(t, env, "vm-f.net1")
		if got.UID != r.UID || !hasUserOn(got, "vm-f", "node-a") {
			t.Fatalf("after the detour the reservation is %s with users %+v, want %s still listing node-a's pod", got.UID, got.Spec.Users, r.UID)
		}

		t.Run("the controller removes a user", func(t *testing.T) {
			cc, err := env.NewClient(env.ServiceAccountKubeconfig(t, "netpool-system", "netpool-controller"))
			if err != nil {
				t.Fatal(err)
			}
			got.Spec.Users = got.Spec.Users[1:]
			if err := cc.Update(ctx, got, client.DryRunAll); err != nil {
				t.Errorf("the controller dropping node-a's user (its pod gone): %v", err)
			}
		})
	})

	t.Run("an idle owner's address cannot be taken over and deleted", func(t *testing.T) {
		vm(t, "vm-i")
		if _, err := sh.call("DEL", "vm-i", "K8S_POD_NAMESPACE=default;K8S_POD_NAME=launcher-vm-i", netConf(network, na.socket, extra)); err != nil {
			t.Fatalf("DEL of the stopped VM: %v", err)
		}
		r := claimReservation(t, env, "vm-i.net1")
		if len(r.Spec.Users) != 0 {
			t.Fatalf("after DEL the reservation has users %+v, want none (idle)", r.Spec.Users)
		}
		// Not even its own node deletes it: only the owner's end releases it.
		wantDenied(t, ca.Delete(ctx, r.DeepCopy(), client.DryRunAll),
			"node node-a may not delete reservation "+r.Name+": its address belongs to IPAMClaim default/vm-i.net1")
		r = takeOver(t, r)
		wantDenied(t, cb.Delete(ctx, r.DeepCopy()), "node node-b may not delete reservation "+r.Name)
		if got := claimReservation(t, env, "vm-i.net1"); got.UID != r.UID {
			t.Fatalf("the idle claim's reservation was replaced")
		}
	})
}

// claimReservation is the reservation of IPAMClaim default/name.
func claimReservation(t *testing.T, env *envtest.Env, name string) *ipamv1.OverlappingRangeIPReservation {
	t.Helper()
	var list ipamv1.OverlappingRangeIPReservationList
	key := ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: "default", Name: name}.Key()
	if err := env.Client.List(context.Background(), &list, client.MatchingLabels{ipamv1.OwnerLabel: ipamv1.OwnerLabelValue(key)}); err != nil || len(list.Items) != 1 {
		t.Fatalf("reservations of IPAMClaim default/%s: %d, %v; want 1", name, len(list.Items), err)
	}
	return &list.Items[0]
}

func hasUserOn(r *ipamv1.OverlappingRangeIPReservation, containerID, node string) bool {
	for _, u := range r.Spec.Users {
		if u.ContainerID == containerID && u.Node == node {
			return true
		}
	}
	return false
}
