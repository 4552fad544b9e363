package kubestore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/podowner"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/poll"
)

// TestClaims runs the claim rules on a real API server through one node's store: a claim without
// spec.interface, as KubeVirt's ipam-extensions makes them, is the attachment's whose element
// references it; a reference that is no object name is refused at once; a claim made again under a
// deleted one's name gets an address of its own; an ADD that fails after claiming leaves the
// address to the claim, unbound; a status write that failed is made again by the retried ADD.
func TestClaims(t *testing.T) {
	env := envtest.Shared(t)
	env.InstallIPAMClaimCRD(t)
	ctx := context.Background()
	var failStatus atomic.Int32
	n := &node{store: MustStart(t, env, "node-claims", Options{APITimeout: 3 * time.Second}, func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, "/status") && failStatus.Add(-1) >= 0 {
				return nil, errors.New("read: connection reset by peer (injected)")
			}
			return rt.RoundTrip(req)
		})
	})}
	const ns = "claims"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	vmNet := conf("vm-net", `,"range":"10.147.0.0/24","allowPersistentIPs":true`)
	claim := func(t *testing.T, name, iface string) *ipamclaimsv1.IPAMClaim {
		t.Helper()
		c := &ipamclaimsv1.IPAMClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: ipamclaimsv1.IPAMClaimSpec{Network: "vm-net", Interface: iface}}
		if err := env.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	pod := func(t *testing.T, name, networks string) string {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{podowner.NetworksAnnotation: networks}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "compute", Image: "virt-launcher"}}}}
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		return "K8S_POD_NAMESPACE=" + ns + ";K8S_POD_NAME=" + name + ";K8S_POD_UID=" + string(p.UID)
	}
	owned := func(t *testing.T, claim string) []ipamv1.OverlappingRangeIPReservation {
		t.Helper()
		key := ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: ns, Name: claim}.Key()
		return reservations(t, env, client.MatchingLabels{ipamv1.OwnerLabel: ipamv1.OwnerLabelValue(key)})
	}

	t.Run("a claim without interface is its referencing element's", func(t *testing.T) {
		// The element as ipam-extensions' webhook writes it when KubeVirt gave no interface name:
		// Multus then names the attachment net1 by its position.
		c := claim(t, "vm-a.anet", "")
		args := pod(t, "virt-launcher-vm-a-abcde", `[{"name":"vm-net","namespace":"claims","ipam-claim-reference":"vm-a.anet"}]`)
		got, err := n.add(vmNet, args, "vm-a-1")
		if err != nil {
			t.Fatalf("ADD with a claim of no interface: %v", err)
		}
		rs := owned(t, "vm-a.anet")
		if len(rs) != 1 || rs[0].Spec.Address != got[0].String() || rs[0].Spec.Owner.UID != string(c.UID) {
			t.Fatalf("reservations of the claim %+v, want one of %s recording the claim's UID %s", rs, got[0], c.UID)
		}
	})

	t.Run("two elements referencing one claim without interface", func(t *testing.T) {
		claim(t, "vm-b.anet", "")
		args := pod(t, "virt-launcher-vm-b", `[{"name":"vm-net","ipam-claim-reference":"vm-b.anet"},{"name":"vm-net","ipam-claim-reference":"vm-b.anet"}]`)
		_, err := n.add(vmNet, args, "vm-b-1")
		want := "IPAMClaim claims/vm-b.anet has no interface and 2 network selection elements of pod claims/virt-launcher-vm-b reference it"
		if !errors.Is(err, allocator.ErrPersistentOwnerInvalid) || !strings.Contains(err.Error(), want) {
			t.Fatalf("ADD = %v, want %v containing %q", err, allocator.ErrPersistentOwnerInvalid, want)
		}
	})

	t.Run("a claim reference that is no object name", func(t *testing.T) {
		args := pod(t, "virt-launcher-vmx", `[{"name":"vm-net","ipam-claim-reference":"team-b/vmx.net1"}]`)
		start := time.Now()
		_, err := n.add(vmNet, args, "vmx-1")
		want := `interface net1 of pod claims/virt-launcher-vmx references IPAMClaim "team-b/vmx.net1", which is not a valid object name`
		if !errors.Is(err, allocator.ErrPersistentOwnerInvalid) || !strings.Contains(err.Error(), want) {
			t.Fatalf("ADD = %v, want %v containing %q", err, allocator.ErrPersistentOwnerInvalid, want)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("the refusal took %v", d)
		}
	})

	t.Run("a claim made again under a deleted one's name gets its own address", func(t *testing.T) {
		old := claim(t, "vm-c.anet", "")
		networks := `[{"name":"vm-net","ipam-claim-reference":"vm-c.anet"}]`
		args := pod(t, "virt-launcher-vm-c-1", networks)
		first, err := n.add(vmNet, args, "vm-c-1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.del(vmNet, "vm-c-1"); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Delete(ctx, old); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, 10*time.Second, "the claim is gone", func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), &ipamclaimsv1.IPAMClaim{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("get: %v, want not found", err)
			}
			return nil
		})
		renewed := claim(t, "vm-c.anet", "")
		second, err := n.add(vmNet, pod(t, "virt-launcher-vm-c-2", networks), "vm-c-2")
		if err != nil {
			t.Fatal(err)
		}
		if second[0] == first[0] {
			t.Fatalf("the claim made again got the deleted claim's address %s", first[0])
		}
		byUID := map[string]string{}
		for _, r := range owned(t, "vm-c.anet") {
			byUID[r.Spec.Owner.UID] = r.Spec.Address
		}
		if byUID[string(old.UID)] != first[0].String() || byUID[string(renewed.UID)] != second[0].String() {
			t.Fatalf("reservations by claim UID %v, want %s for the deleted claim (the GC's to release) and %s for the new one", byUID, first[0], second[0])
		}
	})

	t.Run("an ADD that fails after claiming leaves the address to the claim", func(t *testing.T) {
		// Two ranges: the second has one address, which a plain attachment takes first.
		dual := conf("vm-net", `,"ipRanges":[{"range":"10.147.1.0/24"},{"range":"10.147.2.0/24","range_start":"10.147.2.9","range_end":"10.147.2.9"}],"allowPersistentIPs":true`)
		if _, err := n.add(dual, pod(t, "plain", `[{"name":"vm-net"}]`), "plain-1"); err != nil {
			t.Fatal(err)
		}
		claim(t, "vm-d.anet", "")
		_, err := n.add(dual, pod(t, "virt-launcher-vm-d", `[{"name":"vm-net","ipam-claim-reference":"vm-d.anet"}]`), "vm-d-1")
		if !errors.Is(err, allocator.ErrPoolExhausted) {
			t.Fatalf("ADD with the second range full = %v, want %v", err, allocator.ErrPoolExhausted)
		}
		rs := owned(t, "vm-d.anet")
		if len(rs) != 1 || len(rs[0].Spec.Users) != 0 {
			t.Fatalf("after the failed ADD the claim's reservations are %+v, want one, unbound (node isolation lets no agent delete it)", rs)
		}
	})

	t.Run("a status write that failed is made by the retried ADD", func(t *testing.T) {
		c := claim(t, "vm-e.anet", "")
		args := pod(t, "virt-launcher-vm-e", `[{"name":"vm-net","ipam-claim-reference":"vm-e.anet"}]`)
		failStatus.Store(100) // every attempt of the first ADD's status write
		if _, err := n.add(vmNet, args, "vm-e-1"); !errors.Is(err, allocator.ErrStoreBusy) {
			t.Fatalf("ADD whose status write gets no answer = %v, want %v", err, allocator.ErrStoreBusy)
		}
		failStatus.Store(0)
		got, err := n.add(vmNet, args, "vm-e-1")
		if err != nil {
			t.Fatalf("the retried ADD: %v", err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			t.Fatal(err)
		}
		want := netip.PrefixFrom(got[0], 24).String()
		if len(c.Status.IPs) != 1 || c.Status.IPs[0] != want || c.Status.OwnerPod == nil || c.Status.OwnerPod.Name != "virt-launcher-vm-e" {
			t.Fatalf("claim status after the retried ADD %+v, want ips [%s] and ownerPod virt-launcher-vm-e", c.Status, want)
		}
	})
}
