package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/internal/podowner"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/poll"
)

// TestNodeRestriction installs deploy/base/agent-rbac.yaml and deploy/base/agent-admission.yaml and runs two
// agents with real pod-bound ServiceAccount tokens of two nodes, as the kubelet would give them.
// Normal ADD and DEL work through both; every write one node's credentials make on the other
// node's reservations and slices is denied, and so are forged objects, a pool that admits nobody
// and a pool squatting another range's inline name. A token bound to no node can write nothing,
// and the controller's identity still releases any node's reservation.
func TestNodeRestriction(t *testing.T) {
	env := envtest.Start(t)
	ctx := context.Background()
	applyManifests(t, env)
	for _, o := range readManifest(t, filepath.Join("..", "..", "deploy", "base", "agent-admission.yaml")) {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	for _, f := range []string{"controller-rbac.yaml", "controller-role.yaml"} {
		for _, o := range readManifest(t, filepath.Join("..", "..", "deploy", "base", f)) {
			if err := env.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	}

	cfgA := podBoundConfig(t, env, "node-a")
	cfgB := podBoundConfig(t, env, "node-b")
	ca, cb := mustClient(t, env, cfgA), mustClient(t, env, cfgB)
	waitPolicyActive(t, ca)

	dir := socketDir(t)
	na := startAgent(t, cfgA, Options{NodeName: "node-a", Socket: filepath.Join(dir, "a.sock"), Log: discardLog(), Stderr: io.Discard})
	nb := startAgent(t, cfgB, Options{NodeName: "node-b", Socket: filepath.Join(dir, "b.sock"), Log: discardLog(), Stderr: io.Discard})
	sh := newShim()
	// A /26 makes four slices of 16 (smaller pools are one slice), so each node holds its own.
	extra := `,"range":"10.84.0.0/26"`
	ipA := sh.addIP(t, "ctr-a", netConf("iso", na.socket, extra))
	ipB := sh.addIP(t, "ctr-b", netConf("iso", nb.socket, extra))
	if ipA == ipB {
		t.Fatalf("both nodes got %s", ipA)
	}
	resB := reservationOf(t, env, "node-b")
	sliceB := sliceOf(t, env, "node-b")

	t.Run("another node's reservation cannot be deleted", func(t *testing.T) {
		err := ca.Delete(ctx, resB.DeepCopy())
		wantDenied(t, err, "node node-a may not delete overlappingrangeipreservations "+resB.Name+" of node node-b")
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(resB), &ipamv1.OverlappingRangeIPReservation{}); err != nil {
			t.Errorf("node-b's reservation after the denied delete: %v", err)
		}
	})
	t.Run("another node's reservation and slice cannot be updated", func(t *testing.T) {
		// RBAC gives the agent no update of slices, and update of reservations only to bind a
		// claim's address; the policy denies both across nodes.
		r := resB.DeepCopy()
		r.Labels[ipamv1.NodeLabel] = "node-a"
		r.Spec.Node = "node-a"
		if err := ca.Update(ctx, r); !apierrors.IsForbidden(err) {
			t.Errorf("node-a relabelling node-b's reservation: %v, want Forbidden", err)
		}
		sl := sliceB.DeepCopy()
		sl.Spec.Node = "node-a"
		sl.Labels = map[string]string{ipamv1.NodeLabel: "node-a"}
		if err := ca.Update(ctx, sl); !apierrors.IsForbidden(err) {
			t.Errorf("node-a taking node-b's slice: %v, want Forbidden", err)
		}
		// Were update granted by mistake, the policy still holds.
		grantUpdate(t, env)
		var err error
		poll.Eventually(t, 30*time.Second, "the policy denies node-a taking node-b's slice with update granted", func() error {
			err = ca.Update(ctx, sl.DeepCopy())
			switch {
			case err == nil:
				t.Fatalf("node-a took node-b's slice with update granted, want the policy's denial")
			case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "netpool-agent-node-restriction"):
				return err
			}
			return nil
		})
		wantDenied(t, err, "node node-a may not update ippoolslices "+sl.Name+" of node node-b")
		wantDenied(t, ca.Update(ctx, r), "node node-a may not update overlappingrangeipreservations "+r.Name+" of node node-b")
		var got ipamv1.IPPoolSlice
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sl), &got); err != nil || got.Spec.Node != "node-b" {
			t.Errorf("node-b's slice after the denied updates: %+v, %v", got.Spec, err)
		}
	})
	t.Run("another node's slice cannot be deleted", func(t *testing.T) {
		wantDenied(t, ca.Delete(ctx, sliceB.DeepCopy()), "node node-a may not delete ippoolslices "+sliceB.Name+" of node node-b")
	})
	t.Run("only a slice's own node records its cooling addresses", func(t *testing.T) {
		// The agent may patch slices, to record cooling addresses (spec.cooling). Another node's
		// records are not its to write: forged ones would hold addresses back, erased ones would
		// let a cooling address be reused.
		a := netip.MustParsePrefix(sliceB.Spec.Range).Addr().Next().String()
		cooling := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"cooling":[{"address":"`+a+`","releasedAt":"2026-12-01T10:00:00Z"}]}}`))
		wantDenied(t, ca.Patch(ctx, sliceB.DeepCopy(), cooling), "node node-a may not update ippoolslices "+sliceB.Name+" of node node-b")
		if err := cb.Patch(ctx, sliceB.DeepCopy(), cooling, client.DryRunAll); err != nil {
			t.Errorf("node-b recording cooling addresses on its own slice: %v", err)
		}
		// A patch is an update: a node cannot hand its block to another with it either.
		handOver := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"node":"node-a"}}`))
		wantDenied(t, cb.Patch(ctx, sliceB.DeepCopy(), handOver), "node node-b may not update ippoolslices "+sliceB.Name+" of node node-a")
		// Nor may the patch of its own slice change anything but spec.cooling: without the pool
		// label the block is hidden from every other node and the controller, and a finalizer
		// or owner reference of the node's choosing would keep it from being deleted.
		onlyCooling := "node node-b may update ippoolslices " + sliceB.Name + " only to record its cooling addresses"
		for name, patch := range map[string]string{
			"drops the pool label":     `{"metadata":{"labels":{"` + ipamv1.PoolLabel + `":null}}}`,
			"relabels the pool":        `{"metadata":{"labels":{"` + ipamv1.PoolLabel + `":"other-pool"}}}`,
			"adds an annotation":       `{"metadata":{"annotations":{"example.com/x":"y"}}}`,
			"adds a finalizer":         `{"metadata":{"finalizers":["example.com/keep"]}}`,
			"adds an owner reference":  `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"node-b","uid":"` + string(sliceB.UID) + `"}]}}`,
			"cooling with a finalizer": `{"metadata":{"finalizers":["example.com/keep"]},"spec":{"cooling":[{"address":"` + a + `","releasedAt":"2026-12-01T10:00:00Z"}]}}`,
		} {
			p := client.RawPatch(types.MergePatchType, []byte(patch))
			if err := cb.Patch(ctx, sliceB.DeepCopy(), p, client.DryRunAll); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), onlyCooling) {
				t.Errorf("node-b's patch of its own slice that %s: %v, want Forbidden with %q", name, err, onlyCooling)
			}
		}
		var got ipamv1.IPPoolSlice
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sliceB), &got); err != nil || got.Labels[ipamv1.PoolLabel] != sliceB.Labels[ipamv1.PoolLabel] || len(got.Finalizers) != 0 {
			t.Errorf("node-b's slice after the denied patches: labels %v finalizers %v, %v", got.Labels, got.Finalizers, err)
		}
	})
	t.Run("reservations and slices cannot be forged for another node", func(t *testing.T) {
		forged := forgedReservation("10.84.0.14", "node-b", "node-b")
		wantDenied(t, ca.Create(ctx, forged), "node node-a may not create overlappingrangeipreservations "+forged.Name+" of node node-b")
		mislabelled := forgedReservation("10.84.0.14", "node-a", "node-b")
		wantDenied(t, ca.Create(ctx, mislabelled), "without the label ipam.netpool.io/node=node-a")
		sl := &ipamv1.IPPoolSlice{
			ObjectMeta: metav1.ObjectMeta{Name: sliceB.Spec.Pool + ".99", Labels: map[string]string{ipamv1.NodeLabel: "node-b"}},
			Spec:       ipamv1.IPPoolSliceSpec{Pool: sliceB.Spec.Pool, Range: "10.84.0.15/32", Node: "node-b"},
		}
		wantDenied(t, ca.Create(ctx, sl), "node node-a may not create ippoolslices "+sl.Name+" of node node-b")
		// node-b's own credentials may make the same slice (dry run: nothing is kept).
		if err := cb.Create(ctx, sl.DeepCopy(), client.DryRunAll); err != nil {
			t.Errorf("node-b creating its own slice: %v", err)
		}
	})
	t.Run("an agent creates only inline pools under their own name", func(t *testing.T) {
		nobody := &ipamv1.IPPool{
			ObjectMeta: metav1.ObjectMeta{Name: "10.85.0.0-24"},
			Spec: ipamv1.IPPoolSpec{Range: "10.85.0.0/24", NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"nobody": "true"}}},
		}
		wantDenied(t, ca.Create(ctx, nobody, client.DryRunAll), "may not set namespaceSelector, nodeSelector or sliceSize")
		squat := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "10.85.0.0-24"}, Spec: ipamv1.IPPoolSpec{Range: "10.86.0.0/24"}}
		wantDenied(t, ca.Create(ctx, squat, client.DryRunAll), "IPPool 10.85.0.0-24 is not the name of the inline pool of range 10.86.0.0/24")
		named := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "blue-10.85.0.0-24"}, Spec: ipamv1.IPPoolSpec{Range: "10.85.0.0/24"}}
		wantDenied(t, ca.Create(ctx, named, client.DryRunAll), "IPPool blue-10.85.0.0-24 is not the name of the inline pool")
		for _, ok := range []*ipamv1.IPPool{
			{ObjectMeta: metav1.ObjectMeta{Name: "10.85.0.0-24"}, Spec: ipamv1.IPPoolSpec{Range: "10.85.0.0/24"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "blue-10.85.0.0-24"}, Spec: ipamv1.IPPoolSpec{Range: "10.85.0.0/24", NetworkName: "blue"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "fd00---64"}, Spec: ipamv1.IPPoolSpec{Range: "fd00::/64"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "0---0"}, Spec: ipamv1.IPPoolSpec{Range: "::/0"}},
		} {
			if err := ca.Create(ctx, ok, client.DryRunAll); err != nil {
				t.Errorf("inline pool %s of range %s: %v", ok.Name, ok.Spec.Range, err)
			}
		}
	})
	t.Run("a token bound to no node writes nothing", func(t *testing.T) {
		unbound := tokenConfig(t, env, nil)
		cu := mustClient(t, env, unbound)
		wantDenied(t, cu.Create(ctx, forgedReservation("10.84.0.13", "node-a", "node-a"), client.DryRunAll), "the netpool agent's token names no node")
	})
	t.Run("DEL releases through both agents", func(t *testing.T) {
		for _, c := range []struct{ id, socket string }{{"ctr-a", na.socket}, {"ctr-b", nb.socket}} {
			if _, err := sh.call("DEL", c.id, "", netConf("iso", c.socket, extra)); err != nil {
				t.Fatalf("DEL %s: %v", c.id, err)
			}
		}
		var list ipamv1.OverlappingRangeIPReservationList
		if err := env.Client.List(ctx, &list); err != nil || len(list.Items) != 0 {
			t.Fatalf("reservations after DEL: %d, %v", len(list.Items), err)
		}
	})
	t.Run("the controller releases any node's reservation", func(t *testing.T) {
		ipB = sh.addIP(t, "ctr-b2", netConf("iso", nb.socket, extra))
		res := reservationOf(t, env, "node-b")
		cc, err := env.NewClient(env.ServiceAccountKubeconfig(t, "netpool-system", "netpool-controller"))
		if err != nil {
			t.Fatal(err)
		}
		if err := cc.Delete(ctx, res); err != nil {
			t.Errorf("the controller deleting node-b's reservation of %s: %v", ipB, err)
		}
	})
	t.Run("a claim's address moves with its VM, and only so", func(t *testing.T) {
		testClaimTakeOver(t, env, sh, na, nb, ca, cb)
	})
	t.Run("a StatefulSet pod's address follows it to another node", func(t *testing.T) {
		testStatefulSetTakeOver(t, env, sh, na, nb, ca)
	})
	t.Run("a persistent owner's address cannot be freed by another node", func(t *testing.T) {
		testPersistentOwnerHoles(t, env, sh, na, ca, cb)
	})
}

// testClaimTakeOver migrates a VM from node-a to node-b through the agents under their pod-bound
// tokens: node-b takes over the IPAMClaim's reservation (the policy's one exception to "each node
// writes only its own"), and neither node can then drop the other's user or delete the address.
func testClaimTakeOver(t *testing.T, env *envtest.Env, sh *shim, na, nb *running, ca, cb client.Client) {
	ctx := context.Background()
	env.InstallIPAMClaimCRD(t)
	claim := &ipamclaimsv1.IPAMClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm-a.net1"},
		Spec: ipamclaimsv1.IPAMClaimSpec{Network: "iso-vm", Interface: "net1"}}
	if err := env.Client.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"launcher-src", "launcher-dst"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: map[string]string{
				podowner.NetworksAnnotation: `[{"name":"iso-vm","interface":"net1","ipam-claim-reference":"vm-a.net1"}]`}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "compute", Image: "virt-launcher"}}},
		}
		if err := env.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	extra := `,"range":"10.84.1.0/24","allowPersistentIPs":true`
	add := func(id, pod string, r *running) string {
		t.Helper()
		out, err := sh.call("ADD", id, "K8S_POD_NAMESPACE=default;K8S_POD_NAME="+pod, netConf("iso-vm", r.socket, extra))
		if err != nil {
			t.Fatalf("ADD %s on %s: %v", id, r.agent.opts.NodeName, err)
		}
		return firstIP(t, out)
	}
	x := add("vm-src", "launcher-src", na)
	if got := add("vm-dst", "launcher-dst", nb); got != x {
		t.Fatalf("the migration target on node-b got %s, the source on node-a %s", got, x)
	}
	var list ipamv1.OverlappingRangeIPReservationList
	if err := env.Client.List(ctx, &list, client.MatchingFields{"spec.containerID": "vm-dst"}); err != nil || len(list.Items) != 1 {
		t.Fatalf("reservation of the target: %d, %v", len(list.Items), err)
	}
	r := &list.Items[0]
	if r.Spec.Node != "node-b" || r.Labels[ipamv1.NodeLabel] != "node-b" || len(r.Spec.Users) != 2 {
		t.Fatalf("after the take-over the reservation is %+v %v, want node-b's with both users", r.Spec, r.Labels)
	}
	var got ipamclaimsv1.IPAMClaim
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(claim), &got); err != nil || got.Status.OwnerPod == nil || got.Status.OwnerPod.Name != "launcher-dst" {
		t.Fatalf("claim status after the migration: %+v, %v; want ownerPod launcher-dst (written with the agent's token)", got.Status, err)
	}

	// node-a may take it back only keeping node-b's user; dropping it is denied.
	back := r.DeepCopy()
	back.Spec.Node, back.Labels[ipamv1.NodeLabel] = "node-a", "node-a"
	back.Spec.Users = back.Spec.Users[:1] // the source's entry, on node-a
	wantDenied(t, ca.Update(ctx, back, client.DryRunAll),
		"node node-a may not drop or change the users of other nodes of reservation "+r.Name+" (vm-dst on node node-b)")
	keep := r.DeepCopy()
	keep.Spec.Node, keep.Labels[ipamv1.NodeLabel] = "node-a", "node-a"
	if err := ca.Update(ctx, keep, client.DryRunAll); err != nil {
		t.Errorf("node-a taking the reservation back with every user kept (a migration back): %v", err)
	}
	// The reservation of an unowned address still cannot be taken over.
	plain := forgedReservation("10.84.0.40", "node-b", "node-b")
	if err := cb.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	plain.Spec.Node, plain.Labels[ipamv1.NodeLabel] = "node-a", "node-a"
	wantDenied(t, ca.Update(ctx, plain, client.DryRunAll), "node node-a may not update overlappingrangeipreservations "+plain.Name+" of node node-b")
	// The holder cannot delete the address while the source's pod on node-a is bound to it, nor
	// can node-a.
	wantDenied(t, cb.Delete(ctx, r.DeepCopy(), client.DryRunAll), "node node-b may not delete reservation "+r.Name+": its address belongs to IPAMClaim default/vm-a.net1")
	wantDenied(t, ca.Delete(ctx, r.DeepCopy(), client.DryRunAll), "node node-a may not delete overlappingrangeipreservations "+r.Name+" of node node-b")

	// DEL of the source (node-a no longer holds it) leaves the address held.
	if _, err := sh.call("DEL", "vm-src", "K8S_POD_NAMESPACE=default;K8S_POD_NAME=launcher-src", netConf("iso-vm", na.socket, extra)); err != nil {
		t.Fatalf("DEL of the source: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), &ipamv1.OverlappingRangeIPReservation{}); err != nil {
		t.Fatalf("the claim's reservation after the source's DEL: %v", err)
	}
}

// grantUpdate gives the agent's ServiceAccount update on reservations and slices, which
// deploy/base/agent-rbac.yaml never does.
func grantUpdate(t *testing.T, env *envtest.Env) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "netpool-agent-update-by-mistake"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{ipamv1.GroupName}, Verbs: []string{"update"},
			Resources: []string{"overlappingrangeipreservations", "ippoolslices"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: agentNamespace, Name: agentServiceAccount}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// podBoundConfig creates Node node and a Pod of the agent's ServiceAccount on it, and returns a
// REST config with a token bound to that pod, as the kubelet projects one into the agent.
func podBoundConfig(t *testing.T, env *envtest.Env, node string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := env.Client.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "netpool-agent-" + node, Namespace: agentNamespace},
		Spec: corev1.PodSpec{
			NodeName: node, ServiceAccountName: agentServiceAccount,
			Containers: []corev1.Container{{Name: "agent", Image: "netpool-agent"}},
		},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return tokenConfig(t, env, &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID})
}

// tokenConfig requests a token of the agent's ServiceAccount, bound to bound when it is set, and
// returns a REST config that authenticates with it alone.
func tokenConfig(t *testing.T, env *envtest.Env, bound *authenticationv1.BoundObjectReference) *rest.Config {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: agentServiceAccount, Namespace: agentNamespace}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: bound}}
	if err := env.Client.SubResource("token").Create(context.Background(), sa, tr); err != nil {
		t.Fatalf("requesting a token: %v", err)
	}
	if tr.Status.Token == "" {
		t.Fatal("token request returned no token")
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token
	cfg.QPS, cfg.Burst = kubeclient.DefaultQPS, kubeclient.DefaultBurst
	return cfg
}

func mustClient(t *testing.T, env *envtest.Env, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitPolicyActive waits until the API server enforces the policy: a new policy takes a moment
// to be compiled and bound.
func waitPolicyActive(t *testing.T, c client.Client) {
	t.Helper()
	poll.Eventually(t, 30*time.Second, "the admission policy is enforced", func() error {
		err := c.Create(context.Background(), forgedReservation("10.84.0.12", "node-other", "node-other"), client.DryRunAll)
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "netpool-agent-node-restriction") {
			return nil
		}
		return fmt.Errorf("a forged create got %v", err)
	})
}

func forgedReservation(addr, node, label string) *ipamv1.OverlappingRangeIPReservation {
	return &ipamv1.OverlappingRangeIPReservation{
		ObjectMeta: metav1.ObjectMeta{Name: "10.84.0.0-26." + addr, Labels: map[string]string{ipamv1.NodeLabel: label}},
		Spec: ipamv1.OverlappingRangeIPReservationSpec{Address: addr, Pool: "10.84.0.0-26", ContainerID: "forged",
			IfName: "net1", Node: node},
	}
}

func reservationOf(t *testing.T, env *envtest.Env, node string) *ipamv1.OverlappingRangeIPReservation {
	t.Helper()
	var list ipamv1.OverlappingRangeIPReservationList
	if err := env.Client.List(context.Background(), &list, client.MatchingLabels{ipamv1.NodeLabel: node}); err != nil || len(list.Items) != 1 {
		t.Fatalf("reservations of %s: %d, %v; want 1", node, len(list.Items), err)
	}
	return &list.Items[0]
}

func sliceOf(t *testing.T, env *envtest.Env, node string) *ipamv1.IPPoolSlice {
	t.Helper()
	var list ipamv1.IPPoolSliceList
	if err := env.Client.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if list.Items[i].Spec.Node == node {
			return &list.Items[i]
		}
	}
	t.Fatalf("no slice of %s among %d", node, len(list.Items))
	return nil
}

func wantDenied(t *testing.T, err error, msg string) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), msg) {
		t.Errorf("got %v, want Forbidden by the policy with %q", err, msg)
	}
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }
