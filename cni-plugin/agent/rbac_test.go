package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/cni-plugin/ipamplugin"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/ipam"
	"github.com/netpool/netpool/test/envtest"
)

// The agent's identity, as deploy/base/agent-rbac.yaml makes it.
const (
	agentNamespace      = "netpool-system"
	agentServiceAccount = "netpool-agent"
)

// agentManifests are the files an operator applies for the agent, in order.
var agentManifests = []string{"namespace.yaml", "agent-rbac.yaml", "agent-daemonset.yaml"}

// TestAgentRBAC applies deploy/base/agent-rbac.yaml to a real API server and runs two agents as the
// ServiceAccount it binds. They do their whole job under that identity (ADD, CHECK, DEL, GC and
// STATUS; an inline pool created, blocks claimed and given back, a referenced pool's
// namespaceSelector checked, borrowing, exhaustion), and the identity can do nothing beyond: real
// requests outside the role are Forbidden, and a SubjectAccessReview grid over the kinds and verbs
// an agent could plausibly touch allows exactly the role's rules.
func TestAgentRBAC(t *testing.T) {
	env := envtest.Shared(t)
	ctx := context.Background()
	applyManifests(t, env)

	kubeconfig := env.ServiceAccountKubeconfig(t, agentNamespace, agentServiceAccount)
	dir := socketDir(t)
	na := mustRunAs(t, kubeconfig, "node-a", filepath.Join(dir, "a.sock"))
	nb := mustRunAs(t, kubeconfig, "node-b", filepath.Join(dir, "b.sock"))
	sh := newShim()

	t.Run("the agent does its job", func(t *testing.T) {
		// The agent creates an inline range's pool.
		if _, err := sh.call("ADD", "node-a-create", "", netConf("rbac", na.socket, `,"range":"10.82.1.0/29"`)); err != nil {
			t.Fatalf("ADD from a new inline range: %v", err)
		}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "10.82.1.0-29"}, &ipamv1.IPPool{}); err != nil {
			t.Fatalf("the inline pool was not created: %v", err)
		}
		if _, err := sh.call("DEL", "node-a-create", "", netConf("rbac", na.socket, `,"range":"10.82.1.0/29"`)); err != nil {
			t.Fatalf("DEL = %v", err)
		}
		// A /29 without gateway: 6 addresses. Its pool, made first with blocks of one address each
		// (a default block holds at least 16), makes every ADD claim a block.
		sliced := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "10.82.0.0-29"}, Spec: ipamv1.IPPoolSpec{Range: "10.82.0.0/29", SliceSize: 32}}
		if err := env.Client.Create(ctx, sliced); err != nil {
			t.Fatal(err)
		}
		extra := `,"range":"10.82.0.0/29"`
		conf := func(n *running) []byte { return netConf("rbac", n.socket, extra) }
		held := map[string]string{}
		for i := range 3 {
			for _, n := range []*running{na, nb} {
				id := fmt.Sprintf("%s-%d", n.agent.opts.NodeName, i)
				out, err := sh.call("ADD", id, "K8S_POD_NAMESPACE=default;K8S_POD_NAME=p-"+id, conf(n))
				if err != nil {
					t.Fatalf("ADD %s: %v", id, err)
				}
				ip := firstIP(t, out)
				if prev, dup := held[ip]; dup {
					t.Fatalf("%s and %s both got %s", prev, id, ip)
				}
				held[ip] = id
			}
		}
		pool := *sliced
		if got := slicesOf(t, env, pool.Name); got["node-a"] != 3 || got["node-b"] != 3 {
			t.Errorf("slices by node = %v, want 3 each", got)
		}
		// Every address is reserved: the next ADD borrows (a paged List of reservations) and fails
		// with 100, not with a refusal of the API server.
		_, err := sh.call("ADD", "node-a-full", "", conf(na))
		wantCode(t, err, ipamplugin.CodePoolExhausted, "pool exhausted")

		var ipA0 string
		for ip, id := range held {
			if id == "node-a-0" {
				ipA0 = ip
			}
		}
		prev := []byte(strings.Replace(string(conf(na)), `"ipam"`,
			`"prevResult":{"cniVersion":"1.1.0","ips":[{"address":"`+ipA0+`/29"}]},"ipam"`, 1))
		if _, err := sh.call("CHECK", "node-a-0", "", prev); err != nil {
			t.Errorf("CHECK = %v", err)
		}
		if _, err := sh.call("STATUS", "", "", conf(na)); err == nil {
			t.Errorf("STATUS of a full pool succeeded, want code 50")
		} else {
			wantCode(t, err, 50, "")
		}

		// DEL releases the reservation and gives the emptied block back (a slice Delete): node-a
		// still holds two others.
		if _, err := sh.call("DEL", "node-a-0", "", conf(na)); err != nil {
			t.Fatalf("DEL = %v", err)
		}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: ipA0}, &ipamv1.OverlappingRangeIPReservation{}); !apierrors.IsNotFound(err) {
			t.Errorf("reservation %s after DEL: %v, want NotFound", ipA0, err)
		}
		if got := slicesOf(t, env, pool.Name); got["node-a"] != 2 {
			t.Errorf("slices by node after DEL = %v, want node-a's emptied block given back", got)
		}
		if _, err := sh.call("STATUS", "", "", conf(nb)); err != nil {
			t.Errorf("STATUS with a free address = %v", err)
		}
		// node-b takes the free address (it claims the block node-a gave back, or borrows).
		if ip := sh.addIP(t, "node-b-3", conf(nb)); ip != ipA0 {
			t.Errorf("ADD after DEL got %s, want the released %s", ip, ipA0)
		}

		// GC on node-b with node-b-1 valid releases node-b's other attachments, and no other node's.
		gc := []byte(strings.Replace(string(conf(nb)), `"ipam"`,
			`"cni.dev/valid-attachments":[{"containerID":"node-b-1","ifname":"net1"}],"ipam"`, 1))
		if _, err := sh.call("GC", "", "", gc); err != nil {
			t.Fatalf("GC = %v", err)
		}
		left := map[string]bool{}
		var list ipamv1.OverlappingRangeIPReservationList
		if err := env.Client.List(ctx, &list, client.MatchingLabels{ipamv1.PoolLabel: pool.Name}); err != nil {
			t.Fatal(err)
		}
		for _, r := range list.Items {
			left[r.Spec.ContainerID] = true
		}
		want := map[string]bool{"node-a-1": true, "node-a-2": true, "node-b-1": true}
		if !maps.Equal(left, want) {
			t.Errorf("reservations after GC on node-b = %v, want %v", left, want)
		}

		// Under a reuse cool-down, DEL records the released address on the node's slice (a patch).
		cool := netConf("rbac-cool", na.socket, `,"network_name":"rbac-cool","range":"10.82.2.0/24","reuseCooldown":"1h"`)
		ip := sh.addIP(t, "node-a-cool", cool)
		if _, err := sh.call("DEL", "node-a-cool", "", cool); err != nil {
			t.Fatalf("DEL under a cool-down = %v", err)
		}
		if err := na.agent.Store().FlushCooling(ctx); err != nil {
			t.Fatalf("recording the cooling address as the agent: %v", err)
		}
		var slices ipamv1.IPPoolSliceList
		if err := env.Client.List(ctx, &slices, client.MatchingFields{"spec.pool": "rbac-cool-10.82.2.0-24"}); err != nil {
			t.Fatal(err)
		}
		if len(slices.Items) != 1 || len(slices.Items[0].Spec.Cooling) != 1 || slices.Items[0].Spec.Cooling[0].Address != ip {
			t.Errorf("slices of the cool-down pool = %+v, want one recording %s", slices.Items, ip)
		}
	})

	t.Run("a referenced pool's namespaceSelector is read through namespaces", func(t *testing.T) {
		for name, team := range map[string]string{"team-a": "a", "team-b": "b"} {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": team}}}
			if err := env.Client.Create(ctx, ns); err != nil {
				t.Fatal(err)
			}
		}
		pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "rbac-ref"}, Spec: ipamv1.IPPoolSpec{
			Range:             "10.83.0.0/24",
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
		}}
		if err := env.Client.Create(ctx, pool); err != nil {
			t.Fatal(err)
		}
		conf := netConf("rbac-ref", na.socket, `,"pool":"rbac-ref"`)
		// The agent's cache may not have seen the pool and namespaces yet: it reads live then.
		out, err := sh.call("ADD", "ref-1", "K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=p", conf)
		if err != nil {
			t.Fatalf("ADD from an admitted namespace: %v", err)
		}
		if ip := firstIP(t, out); !strings.HasPrefix(ip, "10.83.0.") {
			t.Errorf("ADD from the referenced pool got %s", ip)
		}
		_, err = sh.call("ADD", "ref-2", "K8S_POD_NAMESPACE=team-b;K8S_POD_NAME=p", conf)
		wantCode(t, err, 7, "team-b")
		if _, err := sh.call("DEL", "ref-1", "K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=p", conf); err != nil {
			t.Errorf("DEL = %v", err)
		}
	})

	t.Run("the identity can do nothing beyond its role", func(t *testing.T) {
		c, err := env.NewClient(kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		// What the role grants works with this client, so the refusals below are the role's.
		if err := c.List(ctx, &ipamv1.IPPoolList{}); err != nil {
			t.Fatalf("list ippools as the agent: %v", err)
		}
		var held ipamv1.OverlappingRangeIPReservationList
		if err := env.Client.List(ctx, &held); err != nil || len(held.Items) == 0 {
			t.Fatalf("reservations: %d, %v", len(held.Items), err)
		}
		res := &held.Items[0]
		pool := &ipamv1.IPPool{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "rbac-ref"}, pool); err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "ippools.ipam.netpool.io"}, &crd); err != nil {
			t.Fatal(err)
		}
		labelled := func(o client.Object) client.Object {
			o.SetLabels(map[string]string{"touched": "by-agent"})
			return o
		}
		for _, tt := range []struct {
			what string
			do   func() error
		}{
			{"delete an IPPool", func() error { return c.Delete(ctx, pool.DeepCopy()) }},
			{"update an IPPool", func() error { return c.Update(ctx, labelled(pool.DeepCopy())) }},
			{"update an IPPool's status", func() error {
				p := pool.DeepCopy()
				p.Status.Allocated = new(int64(42))
				return c.Status().Update(ctx, p)
			}},
			{"patch a reservation", func() error {
				return c.Patch(ctx, res.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`)))
			}},
			{"delete a Pod", func() error {
				return c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: agentNamespace, Name: "p"}})
			}},
			{"delete every reservation at once", func() error {
				return c.DeleteAllOf(ctx, &ipamv1.OverlappingRangeIPReservation{})
			}},
			{"get a Secret", func() error {
				return c.Get(ctx, client.ObjectKey{Namespace: agentNamespace, Name: "any"}, &corev1.Secret{})
			}},
			{"list Secrets", func() error { return c.List(ctx, &corev1.SecretList{}) }},
			{"list Pods", func() error { return c.List(ctx, &corev1.PodList{}) }},
			// Nodes are read for their labels (nodeSelector); an agent that could label its node
			// could let itself into any pool.
			{"create a Node", func() error {
				return c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "made-by-agent", Labels: map[string]string{"rack": "r1"}}})
			}},
			{"delete every Node at once", func() error { return c.DeleteAllOf(ctx, &corev1.Node{}) }},
			{"list ConfigMaps", func() error { return c.List(ctx, &corev1.ConfigMapList{}) }},
			{"create a Namespace", func() error {
				return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "made-by-agent"}})
			}},
			{"label a Namespace", func() error {
				ns := &corev1.Namespace{}
				if err := c.Get(ctx, client.ObjectKey{Name: "team-b"}, ns); err != nil {
					return fmt.Errorf("get is granted, so this must work: %w", err)
				}
				return c.Update(ctx, labelled(ns))
			}},
			{"update a CRD", func() error { return c.Update(ctx, labelled(crd.DeepCopy())) }},
			{"create an Event", func() error {
				return c.Create(ctx, &corev1.Event{
					ObjectMeta:     metav1.ObjectMeta{Namespace: agentNamespace, Name: "e"},
					InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: agentNamespace, Name: "p"},
				})
			}},
			{"bind itself to cluster-admin", func() error {
				return c.Create(ctx, &rbacv1.ClusterRoleBinding{
					ObjectMeta: metav1.ObjectMeta{Name: "agent-escalates"},
					RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
					Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: agentNamespace, Name: agentServiceAccount}},
				})
			}},
		} {
			if err := tt.do(); !apierrors.IsForbidden(err) {
				t.Errorf("%s as the agent: %v, want Forbidden", tt.what, err)
			}
		}
	})

	t.Run("the role is exactly what the agent calls", func(t *testing.T) {
		user, groups := envtest.ServiceAccountUser(agentNamespace, agentServiceAccount)
		type resource struct{ group, resource, subresource string }
		granted := map[resource][]string{
			{"ipam.netpool.io", "ippools", ""}:                        {"create", "get", "list", "watch"},
			{"ipam.netpool.io", "ippoolslices", ""}:                   {"create", "delete", "get", "list", "watch", "patch"},
			{"ipam.netpool.io", "overlappingrangeipreservations", ""}: {"create", "delete", "get", "list", "watch", "update"},
			{"", "namespaces", ""}:                                    {"get", "list", "watch"},
			{"", "nodes", ""}:                                         {"get", "list", "watch"},
			{"", "pods", ""}:                                          {"get"},
			{"k8s.cni.cncf.io", "ipamclaims", ""}:                     {"get"},
			{"k8s.cni.cncf.io", "ipamclaims", "status"}:               {"update"},
		}
		resources := []resource{
			{"ipam.netpool.io", "ippools", ""}, {"ipam.netpool.io", "ippools", "status"},
			{"ipam.netpool.io", "ippoolslices", ""}, {"ipam.netpool.io", "ippoolslices", "status"},
			{"ipam.netpool.io", "overlappingrangeipreservations", ""},
			{"ipam.netpool.io", "overlappingrangeipreservations", "status"},
			{"ipam.netpool.io", "egressrouters", ""},
			{"", "namespaces", ""}, {"", "namespaces", "status"}, {"", "pods", ""}, {"", "secrets", ""},
			{"", "configmaps", ""}, {"", "nodes", ""}, {"", "events", ""}, {"", "serviceaccounts", ""},
			{"", "serviceaccounts", "token"}, {"", "services", ""},
			{"events.k8s.io", "events", ""}, {"coordination.k8s.io", "leases", ""},
			{"apiextensions.k8s.io", "customresourcedefinitions", ""},
			{"rbac.authorization.k8s.io", "clusterroles", ""}, {"rbac.authorization.k8s.io", "clusterrolebindings", ""},
			{"k8s.cni.cncf.io", "network-attachment-definitions", ""},
			{"k8s.cni.cncf.io", "ipamclaims", ""}, {"k8s.cni.cncf.io", "ipamclaims", "status"},
			{"apps", "daemonsets", ""}, {"apps", "statefulsets", ""},
		}
		verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "escalate", "bind", "impersonate"}
		for _, r := range resources {
			for _, ns := range []string{"", agentNamespace} {
				for _, verb := range verbs {
					sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
						User: user, Groups: groups,
						ResourceAttributes: &authorizationv1.ResourceAttributes{
							Namespace: ns, Verb: verb, Group: r.group, Resource: r.resource, Subresource: r.subresource,
						},
					}}
					if err := env.Client.Create(ctx, sar); err != nil {
						t.Fatal(err)
					}
					want := slices.Contains(granted[r], verb)
					if sar.Status.Allowed != want {
						t.Errorf("%s %s/%s/%s in namespace %q: allowed = %v, want %v", verb, r.group, r.resource, r.subresource, ns, sar.Status.Allowed, want)
					}
				}
			}
		}
	})
}

// applyManifests creates every object of deploy/base/agent-*.yaml with a server-side dry run (the
// namespace first, which the namespaced objects need to exist for real), checks that the dry run
// stored nothing, and then creates the RBAC objects for real.
func applyManifests(t *testing.T, env *envtest.Env) {
	t.Helper()
	ctx := context.Background()
	var all, rbac []*unstructured.Unstructured
	for _, f := range agentManifests {
		objs := readManifest(t, filepath.Join("..", "..", "deploy", "base", f))
		all = append(all, objs...)
		if f == "agent-rbac.yaml" {
			rbac = objs
		}
	}
	kinds := map[string]int{}
	for _, o := range all {
		kinds[o.GetKind()]++
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"} {
		if kinds[k] != 1 {
			t.Fatalf("deploy/base/agent-*.yaml hold %d %s objects, want 1 (all kinds: %v)", kinds[k], k, kinds)
		}
	}
	// Namespaces first: a dry run, then for real, so that the namespaced objects can be dry-run in it.
	for _, o := range all {
		if o.GetKind() != "Namespace" {
			continue
		}
		if err := env.Client.Create(ctx, o.DeepCopy(), client.DryRunAll); err != nil {
			t.Fatalf("dry-run create of Namespace %s: %v", o.GetName(), err)
		}
		if err := env.Client.Create(ctx, o.DeepCopy()); err != nil {
			t.Fatalf("create Namespace %s: %v", o.GetName(), err)
		}
	}
	for _, o := range all {
		if o.GetKind() == "Namespace" {
			continue
		}
		if err := env.Client.Create(ctx, o.DeepCopy(), client.DryRunAll); err != nil {
			t.Fatalf("dry-run create of %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		got := o.DeepCopy()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), got); !apierrors.IsNotFound(err) {
			t.Fatalf("%s %s after a dry run: %v, want NotFound", o.GetKind(), o.GetName(), err)
		}
	}
	for _, o := range rbac {
		if o.GetKind() == "Namespace" {
			continue
		}
		if err := env.Client.Create(ctx, o.DeepCopy()); err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// readManifest decodes every object of the multi-document YAML file at path.
func readManifest(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// mustRunAs starts an agent for node that authenticates with kubeconfig, the way the agent's main
// loads its identity, and waits until it serves; the test's end stops it.
func mustRunAs(t *testing.T, kubeconfig, node, socket string) *running {
	t.Helper()
	cfg, err := clientConfig(Flags{Kubeconfig: kubeconfig, QPS: kubeclient.DefaultQPS, Burst: kubeclient.DefaultBurst})
	if err != nil {
		t.Fatal(err)
	}
	return startAgent(t, cfg, Options{NodeName: node, Socket: socket, Log: slog.New(slog.DiscardHandler), Stderr: &bytes.Buffer{}})
}

// slicesOf counts the slices of pool by node, as the API server holds them.
func slicesOf(t *testing.T, env *envtest.Env, pool string) map[string]int {
	t.Helper()
	var list ipamv1.IPPoolSliceList
	if err := env.Client.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, s := range list.Items {
		if s.Spec.Pool == pool {
			out[s.Spec.Node]++
		}
	}
	return out
}

// TestAgentDaemonSetManifest checks that deploy/base/agent-daemonset.yaml runs the agent as the
// ServiceAccount agent-rbac.yaml binds, names the node from spec.nodeName, serves the socket the
// plugin dials by default on a host directory, installs the plugin into the host's CNI bin
// directory, and asks for no privilege: no host network or PID, no privileged mode, no
// capabilities, no privilege escalation and a read-only root filesystem.
func TestAgentDaemonSetManifest(t *testing.T) {
	var ds *appsv1.DaemonSet
	for _, o := range readManifest(t, filepath.Join("..", "..", "deploy", "base", "agent-daemonset.yaml")) {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		ds = &appsv1.DaemonSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, ds, true); err != nil {
			t.Fatalf("DaemonSet: %v", err)
		}
	}
	if ds == nil {
		t.Fatal("deploy/base/agent-daemonset.yaml holds no DaemonSet")
	}
	spec := ds.Spec.Template.Spec
	if ds.Namespace != agentNamespace || spec.ServiceAccountName != agentServiceAccount {
		t.Errorf("DaemonSet runs in %q as %q, want %s as %s", ds.Namespace, spec.ServiceAccountName, agentNamespace, agentServiceAccount)
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Errorf("DaemonSet asks for host namespaces: network %v, PID %v, IPC %v", spec.HostNetwork, spec.HostPID, spec.HostIPC)
	}
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath == nil {
			t.Errorf("volume %s is not a hostPath", v.Name)
			continue
		}
		hostPaths[v.Name] = v.HostPath.Path
	}
	mounts := map[string]string{} // container path -> host path
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil || sc.Privileged != nil && *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil ||
			!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
			t.Errorf("container %s: securityContext %+v, want no privilege, no escalation, a read-only root and every capability dropped", c.Name, sc)
		}
		for _, m := range c.VolumeMounts {
			mounts[c.Name+":"+m.MountPath] = hostPaths[m.Name]
			if m.MountPath == "/etc/cni/net.d" && !m.ReadOnly {
				t.Errorf("container %s mounts /etc/cni/net.d writable", c.Name)
			}
		}
	}
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 1 {
		t.Fatalf("DaemonSet has %d containers and %d init containers, want 1 and 1", len(spec.Containers), len(spec.InitContainers))
	}
	agentC, install := spec.Containers[0], spec.InitContainers[0]
	if !slices.Contains(agentC.Args, "--socket="+ipam.DefaultAgentSocket) || mounts["agent:"+filepath.Dir(ipam.DefaultAgentSocket)] != filepath.Dir(ipam.DefaultAgentSocket) {
		t.Errorf("agent args %v and mounts %v: want the socket %s on the host's %s", agentC.Args, mounts, ipam.DefaultAgentSocket, filepath.Dir(ipam.DefaultAgentSocket))
	}
	var nodeName bool
	for _, e := range agentC.Env {
		nodeName = nodeName || e.Name == NodeNameEnv && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}
	if !nodeName {
		t.Errorf("agent env %+v: want %s from the downward API's spec.nodeName", agentC.Env, NodeNameEnv)
	}
	if mounts["install-cni-plugin:/host/opt/cni/bin"] != "/opt/cni/bin" || mounts["install-cni-plugin:/host/etc/cni/net.d"] != "/etc/cni/net.d" ||
		!strings.HasPrefix(strings.Join(install.Command, " "), "/netpoolctl install-cni ") ||
		!slices.Contains(install.Command, "--cni-bin-dir=/host/opt/cni/bin") || !slices.Contains(install.Command, "--net-dir=/host/etc/cni/net.d") {
		t.Errorf("init container %v with mounts %v: want netpoolctl install-cni into the host's /opt/cni/bin and /etc/cni/net.d", install.Command, mounts)
	}
	for _, flag := range []string{"--log-format=json", "--log-level=info"} {
		if !slices.Contains(agentC.Args, flag) {
			t.Errorf("agent args %v: want %s, so every CNI call is logged as a JSON line", agentC.Args, flag)
		}
	}
	// The limit covers the agent's peak measured at 100,000 reservations on one node (316-381 MiB)
	// plus what in-flight requests may hold at once (agentproto's bounds, at most 96 MiB in
	// TestServerBoundsFrameMemory).
	const measuredPeak, framesBound = 381 << 20, 96 << 20
	if limit, ok := agentC.Resources.Limits[corev1.ResourceMemory]; !ok || limit.Value() < measuredPeak+framesBound {
		t.Errorf("agent memory limit %v, want at least %d MiB", agentC.Resources.Limits, (measuredPeak+framesBound)>>20)
	}
	if spec.AutomountServiceAccountToken != nil && !*spec.AutomountServiceAccountToken {
		t.Error("the agent needs its pod-bound ServiceAccount token: deploy/base/agent-admission.yaml reads the node from it")
	}
	for _, p := range []*corev1.Probe{agentC.LivenessProbe, agentC.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.String() != "metrics" || !slices.Contains(agentC.Args, "--metrics-bind-address=:9402") {
			t.Errorf("agent probe %+v: want /healthz and /readyz on the metrics port", p)
		}
	}
}
