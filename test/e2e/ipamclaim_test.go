package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/allocator/kubestore"
	"github.com/netpool/netpool/cni-plugin/ipamplugin"
	"github.com/netpool/netpool/controller"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/podowner"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/poll"
)

// TestIPAMClaims runs KubeVirt's story on a real API server with two node agents and the
// controller, through libcni into network namespaces: a VM's interface keeps its address across a
// restart and a live migration to another node because the address belongs to its IPAMClaim, not
// to a pod; the controller never releases it while the claim exists, and releases it once the
// claim is deleted. Claims that cannot be used fail ADD with their own codes.
func TestIPAMClaims(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	ctx := testContext(t)
	env := envtest.Start(t) // its own API server: the controller's GC runs cluster-wide
	env.InstallIPAMClaimCRD(t)
	const grace = time.Second
	c := mustControllerWith(t, env, func(o *controller.Options) {
		o.GCGrace, o.SweepInterval = grace, 500*time.Millisecond
	})

	const (
		network = "vm-net"
		subnet  = "10.79.0.0/24"
		ns      = "vms"
		claim   = "vm-a.net1"
	)
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	fields := map[string]any{"range": subnet, "gateway": "10.79.0.1", "allowPersistentIPs": true}
	nodes := twoNodes(t, env, network, "np-icbr", fields)
	nodeA, nodeB := nodes[0], nodes[1]
	mustClaim(ctx, t, c, ns, claim, network, "net1")

	// The VM's first launcher pod on node-a gets X; the claim's status records it.
	launcher1 := mustLauncher(ctx, t, c, ns, "virt-launcher-vm-a-1", claim)
	att1 := podAttachment("ic-launcher-1", mustNetNS(t), "net1", ns, launcher1.Name)
	x := resultIPs(t, mustAdd(ctx, t, nodeA, att1))[0]
	assertClaimStatus(ctx, t, c, ns, claim, x, launcher1.Name)
	res := claimedReservation(ctx, t, c, x.Addr())
	if res.Spec.Owner == nil || res.Spec.Owner.Key() != "IPAMClaim/"+ns+"/"+claim || res.Spec.Node != "node-a" || len(res.Spec.Users) != 1 {
		t.Fatalf("reservation of %s: owner %+v, node %s, users %+v; want the claim's, on node-a, with one user", x, res.Spec.Owner, res.Spec.Node, res.Spec.Users)
	}

	t.Run("VM restart keeps the address", func(t *testing.T) {
		mustDel(ctx, t, nodeA, att1)
		if r := claimedReservation(ctx, t, c, x.Addr()); len(r.Spec.Users) != 0 {
			t.Fatalf("after DEL the reservation of %s has users %+v, want none (unbound, still held)", x, r.Spec.Users)
		}
		must(t, c.Delete(ctx, launcher1))
		launcher2 := mustLauncher(ctx, t, c, ns, "virt-launcher-vm-a-2", claim)
		att2 := podAttachment("ic-launcher-2", mustNetNS(t), "net1", ns, launcher2.Name)
		if got := resultIPs(t, mustAdd(ctx, t, nodeA, att2))[0]; got != x {
			t.Fatalf("restarted VM got %s, want its claim's %s", got, x)
		}
		assertClaimStatus(ctx, t, c, ns, claim, x, launcher2.Name)

		t.Run("live migration to another node", func(t *testing.T) {
			target := mustLauncher(ctx, t, c, ns, "virt-launcher-vm-a-3", claim)
			attT := podAttachment("ic-launcher-3", mustNetNS(t), "net1", ns, target.Name)
			if got := resultIPs(t, mustAdd(ctx, t, nodeB, attT))[0]; got != x {
				t.Fatalf("migration target on node-b got %s while the source holds %s, want the same", got, x)
			}
			r := claimedReservation(ctx, t, c, x.Addr())
			if r.Spec.Node != "node-b" || !hasUser(r, "ic-launcher-2", "node-a") || !hasUser(r, "ic-launcher-3", "node-b") {
				t.Fatalf("during the migration the reservation is on %s with users %+v, want node-b with the source and the target", r.Spec.Node, r.Spec.Users)
			}
			mustDel(ctx, t, nodeA, att2) // the source pod goes
			if got := claimedReservation(ctx, t, c, x.Addr()); got.UID != r.UID || !hasUser(got, "ic-launcher-2", "node-a") {
				t.Fatalf("after the source's DEL the reservation of %s is %s with users %+v; want %s, the source's user kept (node-a no longer holds it, and node-b may not drop it)",
					x, got.UID, got.Spec.Users, r.UID)
			}
			must(t, c.Delete(ctx, launcher2))
			poll.Eventually(t, 30*time.Second, "the controller removes the source's user", func() error {
				got, err := reservationAt(ctx, c, x.Addr())
				switch {
				case err != nil:
					return err
				case got == nil || got.UID != r.UID:
					return fmt.Errorf("the reservation of %s is gone or another object", x)
				case len(got.Spec.Users) != 1 || !hasUser(got, "ic-launcher-3", "node-b"):
					return fmt.Errorf("users %+v, want the target's alone", got.Spec.Users)
				}
				return nil
			})
			assertClaimStatus(ctx, t, c, ns, claim, x, target.Name)
			mustCheck(ctx, t, nodeB, attT) // bridge's CHECK asks netpool whether the target holds X

			t.Run("GC keeps a claimed address whose pods are gone", func(t *testing.T) {
				mustDel(ctx, t, nodeB, attT)
				must(t, c.Delete(ctx, target))
				// The GC judges at once (the reservation is older than the grace) and at every
				// sweep; a reservation of deleted pods without a claim would be gone by then.
				time.Sleep(4 * grace)
				if got := claimedReservation(ctx, t, c, x.Addr()); got.UID != r.UID {
					t.Fatalf("the reservation of %s changed while its claim exists", x)
				}
			})

			t.Run("deleting the claim releases the address", func(t *testing.T) {
				must(t, c.Delete(ctx, &ipamclaimsv1.IPAMClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claim}}))
				poll.Eventually(t, 30*time.Second, "the release of "+x.String(), func() error {
					r, err := reservationAt(ctx, c, x.Addr())
					if err == nil && r != nil {
						err = fmt.Errorf("reservation %s still there", r.Name)
					}
					return err
				})
			})
		})
	})

	t.Run("claims that cannot be used", func(t *testing.T) {
		mustClaim(ctx, t, c, ns, "other-net", "blue-net", "net1")
		mustClaim(ctx, t, c, ns, "other-if", network, "net2")
		mustClaim(ctx, t, c, ns, "with-ips", network, "net1")
		tests := []struct {
			name, claim string
			ips         []string
			code        uint
			msg         string
		}{
			{name: "claim of another network", claim: "other-net", code: ipamplugin.CodePersistentOwnerInvalid,
				msg: `IPAMClaim vms/other-net is for network "blue-net", not for this attachment's network "vm-net"`},
			{name: "claim of another interface", claim: "other-if", code: ipamplugin.CodePersistentOwnerInvalid,
				msg: `IPAMClaim vms/other-if is for interface "net2", not for this attachment's interface "net1"`},
			{name: "missing claim", claim: "no-such-claim", code: ipamplugin.CodePersistentOwnerNotFound,
				msg: "IPAMClaim vms/no-such-claim, referenced by interface net1 of pod vms/bad-no-such-claim, does not exist"},
			{name: "claim with ips", claim: "with-ips", ips: []string{"10.79.0.200/24"}, code: ipamplugin.CodePersistentOwnerInvalid,
				msg: "references IPAMClaim vms/with-ips and requests ips: the claim owns the addresses"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				pod := mustLauncher(ctx, t, c, ns, "bad-"+tt.claim, tt.claim)
				att := podAttachment("ic-bad-"+tt.claim, mustNetNS(t), "net1", ns, pod.Name)
				if tt.ips != nil {
					att.CapabilityArgs = map[string]any{"ips": tt.ips}
				}
				_, err := nodeA.Add(ctx, att)
				var cniErr *types.Error
				if !errors.As(err, &cniErr) || cniErr.Code != tt.code || !strings.Contains(cniErr.Msg, tt.msg) {
					t.Fatalf("ADD: %v, want CNI error %d containing %q", err, tt.code, tt.msg)
				}
				mustDel(ctx, t, nodeA, att)
				var list ipamv1.OverlappingRangeIPReservationList
				must(t, c.List(ctx, &list))
				for _, r := range list.Items {
					if r.Spec.ContainerID == att.ContainerID {
						t.Fatalf("the failed ADD left reservation %s", r.Name)
					}
				}
			})
		}
	})

	t.Run("a claim reference that is no object name", func(t *testing.T) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-ref", Annotations: map[string]string{
				podowner.NetworksAnnotation: `[{"name":"vm-net","interface":"net1","ipam-claim-reference":"team-b/vmx.net1"}]`}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "compute", Image: "virt-launcher"}}},
		}
		must(t, c.Create(ctx, pod))
		att := podAttachment("ic-bad-ref", mustNetNS(t), "net1", ns, pod.Name)
		start := time.Now()
		_, err := nodeA.Add(ctx, att)
		var cniErr *types.Error
		want := `references IPAMClaim "team-b/vmx.net1", which is not a valid object name`
		if !errors.As(err, &cniErr) || cniErr.Code != ipamplugin.CodePersistentOwnerInvalid || !strings.Contains(cniErr.Msg, want) {
			t.Fatalf("ADD: %v, want CNI error %d containing %q", err, ipamplugin.CodePersistentOwnerInvalid, want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("the refusal took %v: it was retried", d)
		}
		mustDel(ctx, t, nodeA, att)
	})

	t.Run("an attachment without a claim reference owns its address", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
		must(t, c.Create(ctx, pod))
		att := podAttachment("ic-plain", mustNetNS(t), "net1", ns, pod.Name)
		ip := resultIPs(t, mustAdd(ctx, t, nodeA, att))[0]
		if r := claimedReservation(ctx, t, c, ip.Addr()); r.Spec.Owner != nil {
			t.Fatalf("reservation of a pod without a claim has owner %+v", r.Spec.Owner)
		}
		mustDel(ctx, t, nodeA, att)
		if r, err := reservationAt(ctx, c, ip.Addr()); err != nil || r != nil {
			t.Fatalf("DEL of an unclaimed attachment left reservation %v (%v)", r, err)
		}
	})
}

// mustClaim creates an IPAMClaim, as KubeVirt's ipam-extensions does for a VM's interface.
func mustClaim(ctx context.Context, t *testing.T, c client.Client, ns, name, network, ifName string) {
	t.Helper()
	must(t, c.Create(ctx, &ipamclaimsv1.IPAMClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       ipamclaimsv1.IPAMClaimSpec{Network: network, Interface: ifName},
	}))
}

// mustLauncher creates a VM's launcher pod whose networks annotation references claim for net1,
// as KubeVirt writes it.
func mustLauncher(ctx context.Context, t *testing.T, c client.Client, ns, name, claim string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{
			podowner.NetworksAnnotation: fmt.Sprintf(`[{"name":"vm-net","namespace":%q,"interface":"net1","ipam-claim-reference":%q}]`, ns, claim),
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "compute", Image: "virt-launcher"}}},
	}
	must(t, c.Create(ctx, pod))
	return pod
}

// assertClaimStatus checks what the agent wrote in the claim's status.
func assertClaimStatus(ctx context.Context, t *testing.T, c client.Client, ns, name string, ip netip.Prefix, pod string) {
	t.Helper()
	claim := &ipamclaimsv1.IPAMClaim{}
	must(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, claim))
	cond := meta.FindStatusCondition(claim.Status.Conditions, kubestore.ClaimAllocatedCondition)
	if !slices.Equal(claim.Status.IPs, []string{ip.String()}) || claim.Status.OwnerPod == nil || claim.Status.OwnerPod.Name != pod ||
		cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != kubestore.ClaimAllocatedReason {
		t.Fatalf("claim %s/%s status %+v, want ips [%s], ownerPod %s and condition %s True", ns, name, claim.Status, ip, pod, kubestore.ClaimAllocatedCondition)
	}
}

// claimedReservation returns the reservation of a, failing the test if there is none.
func claimedReservation(ctx context.Context, t *testing.T, c client.Client, a netip.Addr) *ipamv1.OverlappingRangeIPReservation {
	t.Helper()
	r, err := reservationAt(ctx, c, a)
	must(t, err)
	if r == nil {
		t.Fatalf("no reservation of %s", a)
	}
	return r
}

// reservationAt returns the reservation of a, nil when there is none.
func reservationAt(ctx context.Context, c client.Client, a netip.Addr) (*ipamv1.OverlappingRangeIPReservation, error) {
	var list ipamv1.OverlappingRangeIPReservationList
	if err := c.List(ctx, &list); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if list.Items[i].Spec.Address == a.String() {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

func hasUser(r *ipamv1.OverlappingRangeIPReservation, containerID, node string) bool {
	return slices.ContainsFunc(r.Spec.Users, func(u ipamv1.ReservationUser) bool { return u.ContainerID == containerID && u.Node == node })
}
