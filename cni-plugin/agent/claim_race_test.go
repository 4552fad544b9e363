package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/podowner"
	"github.com/netpool/netpool/test/envtest"
)

// TestTwoFirstADDsOfOneClaim races, on two nodes at once, the first ADDs of two pods that reference
// one IPAMClaim holding no address yet (docs/persistent-ips.md, "Two nodes racing on the first ADD
// of one claim"): both ADDs succeed, no address is held twice, each answered address is held by a
// reservation of the claim that lists its attachment, the claim's status names one of them, and a
// DEL of both leaves the addresses with the claim.
func TestTwoFirstADDsOfOneClaim(t *testing.T) {
	env := envtest.Shared(t)
	ctx := context.Background()
	env.InstallIPAMClaimCRD(t)
	const ns, network = "claim-race", "race-net"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	dir := socketDir(t)
	nodes := []*running{
		MustRun(t, env, "node-race-a", filepath.Join(dir, "a.sock"), Options{}),
		MustRun(t, env, "node-race-b", filepath.Join(dir, "b.sock"), Options{}),
	}
	extra := `,"range":"10.85.0.0/24","allowPersistentIPs":true`
	for round := range 6 {
		// The claim as ipam-extensions makes it: no interface, named <vm>.<network>.
		claim := &ipamclaimsv1.IPAMClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("vm-%d.anet", round)},
			Spec: ipamclaimsv1.IPAMClaimSpec{Network: network}}
		if err := env.Client.Create(ctx, claim); err != nil {
			t.Fatal(err)
		}
		type answer struct {
			id, args, addr string
			err            error
		}
		answers := make([]answer, len(nodes))
		for i, n := range nodes {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("launcher-%d-%d", round, i), Annotations: map[string]string{
					podowner.NetworksAnnotation: `[{"name":"` + network + `","interface":"net1","ipam-claim-reference":"` + claim.Name + `"}]`}},
				Spec: corev1.PodSpec{NodeName: n.agent.opts.NodeName, Containers: []corev1.Container{{Name: "compute", Image: "virt-launcher"}}},
			}
			if err := env.Client.Create(ctx, pod); err != nil {
				t.Fatal(err)
			}
			answers[i] = answer{id: fmt.Sprintf("race-%d-%d", round, i), args: "K8S_POD_NAMESPACE=" + ns + ";K8S_POD_NAME=" + pod.Name + ";K8S_POD_UID=" + string(pod.UID)}
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, n := range nodes {
			wg.Go(func() {
				<-start
				out, err := newShim().call("ADD", answers[i].id, answers[i].args, netConf(network, n.socket, extra))
				if err == nil {
					answers[i].addr, err = resultIP(out)
				}
				answers[i].err = err
			})
		}
		close(start)
		wg.Wait()

		var list ipamv1.OverlappingRangeIPReservationList
		key := ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: ns, Name: claim.Name}.Key()
		if err := env.Client.List(ctx, &list, client.MatchingLabels{ipamv1.OwnerLabel: ipamv1.OwnerLabelValue(key)}); err != nil {
			t.Fatal(err)
		}
		held := map[string]*ipamv1.OverlappingRangeIPReservation{}
		for i := range list.Items {
			r := &list.Items[i]
			if prev, dup := held[r.Spec.Address]; dup {
				t.Errorf("round %d: %s held by %s and %s", round, r.Spec.Address, prev.Name, r.Name)
			}
			held[r.Spec.Address] = r
		}
		if len(list.Items) == 0 || len(list.Items) > len(nodes) {
			t.Errorf("round %d: %d reservations of %s, want 1 or 2", round, len(list.Items), claim.Name)
		}
		answered := map[string]bool{}
		for _, a := range answers {
			if a.err != nil {
				t.Errorf("round %d: ADD %s: %v, want success", round, a.id, a.err)
				continue
			}
			answered[a.addr] = true
			r := held[a.addr]
			if r == nil || !hasUser(r, a.id) {
				t.Errorf("round %d: ADD %s was answered %s, which no reservation of %s lists it on (%d reservations)", round, a.id, a.addr, claim.Name, len(list.Items))
			}
		}
		t.Logf("round %d: %d reservations of %s for the answers %s and %s", round, len(list.Items), claim.Name, answers[0].addr, answers[1].addr)
		var got ipamclaimsv1.IPAMClaim
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(claim), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Status.IPs) == 0 {
			t.Errorf("round %d: claim %s has no status.ips after two ADDs", round, claim.Name)
		}
		for _, ip := range got.Status.IPs {
			if addr, _, _ := strings.Cut(ip, "/"); !answered[addr] {
				t.Errorf("round %d: claim %s's status lists %s, which no ADD was answered (%v)", round, claim.Name, ip, answered)
			}
		}

		for i, a := range answers {
			if _, err := newShim().call("DEL", a.id, a.args, netConf(network, nodes[i].socket, extra)); err != nil {
				t.Errorf("round %d: DEL %s: %v", round, a.id, err)
			}
		}
		for addr := range answered {
			if held[addr] == nil {
				continue // reported above
			}
			r := &ipamv1.OverlappingRangeIPReservation{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(held[addr]), r); err != nil {
				t.Errorf("round %d: after DEL the claim's reservation of %s: %v, want it kept", round, addr, err)
			}
		}
	}
}

// hasUser reports whether attachment containerID is among r's users.
func hasUser(r *ipamv1.OverlappingRangeIPReservation, containerID string) bool {
	for _, u := range r.Spec.Users {
		if u.ContainerID == containerID {
			return true
		}
	}
	return false
}
