package kubeclient_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/internal/scheme"
	"github.com/netpool/netpool/test/envtest"
)

// TestREST drives every verb of the client against a real API server: typed kinds of both
// scopes (CRDs as JSON, core kinds as protobuf), a kind whose resource is not its plural (the
// NAD), unstructured objects, options, errors and a watch.
func TestREST(t *testing.T) {
	env := envtest.Start(t)
	env.InstallNADCRD(t)
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubeclient.New(env.Config, s)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	t.Run("cluster-scoped CRD", func(t *testing.T) {
		pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "kc-a"}, Spec: ipamv1.IPPoolSpec{Range: "10.90.0.0/24", NetworkName: "kc"}}
		if err := c.Create(ctx, pool); err != nil {
			t.Fatal(err)
		}
		if pool.UID == "" || pool.ResourceVersion == "" {
			t.Fatalf("Create did not read back the object: %+v", pool.ObjectMeta)
		}
		dup := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "kc-a"}, Spec: pool.Spec}
		if err := c.Create(ctx, dup); !apierrors.IsAlreadyExists(err) {
			t.Fatalf("a second Create: %v, want AlreadyExists", err)
		}
		var got ipamv1.IPPool
		if err := c.Get(ctx, kubeclient.ObjectKey{Name: "kc-a"}, &got); err != nil || got.Spec.Range != "10.90.0.0/24" || got.UID != pool.UID {
			t.Fatalf("Get = %+v, %v", got, err)
		}
		stale := got.DeepCopy()
		got.Spec.Gateway = "10.90.0.1"
		if err := c.Update(ctx, &got); err != nil || got.ResourceVersion == stale.ResourceVersion {
			t.Fatalf("Update: %v (resourceVersion %s)", err, got.ResourceVersion)
		}
		if err := c.Update(ctx, stale); !apierrors.IsConflict(err) {
			t.Fatalf("an Update of a stale copy: %v, want Conflict", err)
		}
		patch := kubeclient.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"kc":"yes"}}}`))
		if err := c.Patch(ctx, &got, patch); err != nil || got.Labels["kc"] != "yes" {
			t.Fatalf("Patch: %v, labels %v", err, got.Labels)
		}
		other := types.UID("00000000-0000-0000-0000-000000000000")
		if err := c.Delete(ctx, &got, kubeclient.Preconditions{UID: &other}); !apierrors.IsConflict(err) {
			t.Fatalf("a Delete of another UID: %v, want Conflict", err)
		}
		if err := c.Delete(ctx, &got, kubeclient.Preconditions{UID: &got.UID, ResourceVersion: &stale.ResourceVersion}); !apierrors.IsConflict(err) {
			t.Fatalf("a Delete of an old resourceVersion: %v, want Conflict", err)
		}
		if err := c.Delete(ctx, &got, kubeclient.Preconditions{UID: &got.UID, ResourceVersion: &got.ResourceVersion}); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, kubeclient.ObjectKey{Name: "kc-a"}, &got); !apierrors.IsNotFound(err) {
			t.Fatalf("Get after Delete: %v, want NotFound", err)
		}
		if err := c.Delete(ctx, &got); !apierrors.IsNotFound(err) {
			t.Fatalf("a second Delete: %v, want NotFound", err)
		}
		dry := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "kc-dry"}, Spec: ipamv1.IPPoolSpec{Range: "10.91.0.0/24"}}
		if err := c.Create(ctx, dry, kubeclient.DryRunAll); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, kubeclient.ObjectKey{Name: "kc-dry"}, dry); !apierrors.IsNotFound(err) {
			t.Fatalf("Get after a dry-run Create: %v, want NotFound", err)
		}
	})

	t.Run("field selector and pages", func(t *testing.T) {
		for i, pool := range []string{"kc-p", "kc-p", "kc-p", "kc-q"} {
			addr := netip.AddrFrom4([4]byte{10, 92, 0, byte(i + 1)})
			r := &ipamv1.OverlappingRangeIPReservation{
				ObjectMeta: metav1.ObjectMeta{Name: ipamv1.ReservationName("kc", addr)},
				Spec:       ipamv1.OverlappingRangeIPReservationSpec{Address: addr.String(), Pool: pool, ContainerID: "c", IfName: "net1", Node: "node-a", NetworkName: "kc"},
			}
			if err := c.Create(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		var names []string
		cont := ""
		for pages := 1; ; pages++ {
			var list ipamv1.OverlappingRangeIPReservationList
			if err := c.List(ctx, &list, kubeclient.MatchingFields{"spec.pool": "kc-p"}, kubeclient.Limit(2), kubeclient.Continue(cont)); err != nil {
				t.Fatal(err)
			}
			if len(list.Items) > 2 {
				t.Fatalf("page %d has %d items, over the limit 2", pages, len(list.Items))
			}
			for _, r := range list.Items {
				names = append(names, r.Spec.Pool)
			}
			if cont = list.Continue; cont == "" {
				if pages != 2 {
					t.Errorf("%d pages, want 2", pages)
				}
				break
			}
		}
		if strings.Join(names, ",") != "kc-p,kc-p,kc-p" {
			t.Fatalf("the reservations of spec.pool=kc-p: %v", names)
		}
	})

	t.Run("namespaced core kind", func(t *testing.T) {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kc"}}); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"a", "b"} {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "kc", Name: name, Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c"}}},
			}
			if err := c.Create(ctx, pod); err != nil {
				t.Fatal(err)
			}
		}
		var pod corev1.Pod
		if err := c.Get(ctx, kubeclient.ObjectKey{Namespace: "kc", Name: "a"}, &pod); err != nil || pod.Spec.Containers[0].Image != "example.invalid/c" {
			t.Fatalf("Get = %+v, %v", pod.Spec, err)
		}
		if err := c.Get(ctx, kubeclient.ObjectKey{Namespace: "default", Name: "a"}, &pod); !apierrors.IsNotFound(err) {
			t.Fatalf("Get of another namespace: %v, want NotFound", err)
		}
		var list corev1.PodList
		if err := c.List(ctx, &list, kubeclient.InNamespace("kc"), kubeclient.MatchingLabels{"app": "b"}); err != nil || len(list.Items) != 1 || list.Items[0].Name != "b" {
			t.Fatalf("List app=b = %v, %v", list.Items, err)
		}
		if err := c.List(ctx, &list); err != nil || len(list.Items) < 2 {
			t.Fatalf("List of every namespace = %d pods, %v", len(list.Items), err)
		}
		if err := c.Delete(ctx, &list.Items[0], kubeclient.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("NAD and unstructured", func(t *testing.T) {
		nad := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kc-net"},
			Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion":"1.0.0","type":"macvlan"}`}}
		if err := c.Create(ctx, nad); err != nil {
			t.Fatal(err)
		}
		var nads nadv1.NetworkAttachmentDefinitionList
		if err := c.List(ctx, &nads, kubeclient.InNamespace("default")); err != nil || len(nads.Items) != 1 {
			t.Fatalf("List of NADs = %v, %v", nads.Items, err)
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(nadv1.SchemeGroupVersion.WithKind("NetworkAttachmentDefinition"))
		if err := c.Get(ctx, kubeclient.ObjectKey{Namespace: "default", Name: "kc-net"}, u); err != nil {
			t.Fatal(err)
		}
		if cfg, _, _ := unstructured.NestedString(u.Object, "spec", "config"); cfg != nad.Spec.Config {
			t.Fatalf("unstructured spec.config = %q", cfg)
		}
		patch := kubeclient.RawPatch(types.JSONPatchType, []byte(`[{"op":"test","path":"/metadata/resourceVersion","value":"`+
			u.GetResourceVersion()+`"},{"op":"replace","path":"/spec/config","value":"{}"}]`))
		if err := c.Patch(ctx, u, patch); err != nil {
			t.Fatal(err)
		}
		if cfg, _, _ := unstructured.NestedString(u.Object, "spec", "config"); cfg != "{}" {
			t.Fatalf("after the patch, spec.config = %q", cfg)
		}
		if err := c.Patch(ctx, u, patch); err == nil || !apierrors.IsInvalid(err) && !strings.Contains(err.Error(), "test operation") {
			t.Fatalf("a patch whose test fails: %v", err)
		}
		ul := &unstructured.UnstructuredList{}
		ul.SetGroupVersionKind(nadv1.SchemeGroupVersion.WithKind("NetworkAttachmentDefinitionList"))
		if err := c.List(ctx, ul, kubeclient.InNamespace("default")); err != nil || len(ul.Items) != 1 || ul.Items[0].GetName() != "kc-net" {
			t.Fatalf("unstructured List = %v, %v", ul.Items, err)
		}
		missing := &unstructured.UnstructuredList{}
		missing.SetGroupVersionKind(schemaGVK("whereabouts.cni.cncf.io", "v1alpha1", "IPPoolList"))
		if err := c.List(ctx, missing); !meta.IsNoMatchError(err) {
			t.Fatalf("a List of a group the server does not serve: %v, want NoKindMatchError", err)
		}
		odd := &unstructured.Unstructured{}
		odd.SetGroupVersionKind(schemaGVK("ipam.netpool.io", "v1alpha1", "Nothing"))
		if err := c.Get(ctx, kubeclient.ObjectKey{Name: "x"}, odd); !meta.IsNoMatchError(err) {
			t.Fatalf("a Get of a kind a served group lacks: %v, want NoKindMatchError", err)
		}
		if _, err := c.Watch(ctx, ul); err == nil || !strings.Contains(err.Error(), "unstructured") {
			t.Fatalf("a Watch of unstructured objects: %v, want an error", err)
		}
	})

	t.Run("missing object or kind not served", func(t *testing.T) {
		// The IPAMClaim CRD is not installed: the policy must not take that for a deleted claim.
		err := c.Get(ctx, kubeclient.ObjectKey{Namespace: "default", Name: "vm"}, &ipamclaimsv1.IPAMClaim{})
		if !meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			t.Fatalf("Get of an IPAMClaim without its CRD: %v, want NoKindMatchError", err)
		}
		for range 2 { // the second answer comes from what the first discovery learnt
			err := c.Get(ctx, kubeclient.ObjectKey{Name: "kc-none"}, &ipamv1.IPPool{})
			if !apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				t.Fatalf("Get of a missing IPPool: %v, want NotFound", err)
			}
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, kubeclient.InNamespace("kc-none")); err != nil {
			t.Fatalf("List in a namespace that does not exist: %v, want an empty list", err)
		}
	})

	t.Run("kind not in the scheme", func(t *testing.T) {
		c, err := kubeclient.New(env.Config, runtime.NewScheme())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, kubeclient.ObjectKey{Name: "x"}, &ipamv1.IPPool{}); err == nil || !strings.Contains(err.Error(), "no kind of the client's scheme") {
			t.Fatalf("Get of a kind the scheme lacks: %v", err)
		}
	})

	t.Run("watch", func(t *testing.T) {
		var list ipamv1.IPPoolList
		if err := c.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		w, err := c.Watch(ctx, &ipamv1.IPPoolList{}, &kubeclient.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "kc-w"}, Spec: ipamv1.IPPoolSpec{Range: "10.93.0.0/24"}}
		if err := c.Create(ctx, pool); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*ipamv1.IPPool)
			if ev.Type != watch.Added || !ok || p.Name != "kc-w" {
				t.Fatalf("the first event: %s %T %v", ev.Type, ev.Object, ev.Object)
			}
		case <-time.After(time.Minute): // generous: the machine may be loaded
			t.Fatal("no watch event within a minute of the Create")
		}
	})
}

func schemaGVK(group, version, kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: group, Version: version, Kind: kind}
}
