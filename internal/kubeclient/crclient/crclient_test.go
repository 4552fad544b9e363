package crclient

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/netpool/netpool/internal/kubeclient"
)

// TestAdapter: each verb and option reaches the controller-runtime client it wraps (a fake: the
// adapter only translates).
func TestAdapter(t *testing.T) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	pod := func(ns, name, app string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}}}
	}
	c := Client(fake.NewClientBuilder().WithScheme(s).WithObjects(pod("a", "p1", "x"), pod("a", "p2", "y"), pod("b", "p3", "x")).Build())
	ctx := context.Background()

	var list corev1.PodList
	if err := c.List(ctx, &list, kubeclient.InNamespace("a"), kubeclient.MatchingLabels{"app": "x"}); err != nil || len(list.Items) != 1 || list.Items[0].Name != "p1" {
		t.Fatalf("List in a with app=x = %v, %v", list.Items, err)
	}
	if err := c.List(ctx, &list, kubeclient.MatchingLabels{"app": "x"}); err != nil || len(list.Items) != 2 {
		t.Fatalf("List with app=x = %v, %v", list.Items, err)
	}
	var p corev1.Pod
	if err := c.Get(ctx, kubeclient.ObjectKey{Namespace: "a", Name: "p2"}, &p); err != nil || p.Labels["app"] != "y" {
		t.Fatalf("Get = %+v, %v", p.ObjectMeta, err)
	}
	if err := c.Patch(ctx, &p, kubeclient.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"z"}}}`))); err != nil || p.Labels["app"] != "z" {
		t.Fatalf("Patch: %v, labels %v", err, p.Labels)
	}
	p.Labels["app"] = "w"
	if err := c.Update(ctx, &p); err != nil {
		t.Fatal(err)
	}
	// The fake checks a precondition's resourceVersion only.
	stale := "1"
	if err := c.Delete(ctx, &p, kubeclient.Preconditions{ResourceVersion: &stale}); !apierrors.IsConflict(err) {
		t.Fatalf("a Delete of an old resourceVersion: %v, want Conflict", err)
	}
	if err := c.Delete(ctx, &p, kubeclient.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, kubeclient.ObjectKey{Namespace: "a", Name: "p2"}, &p); !apierrors.IsNotFound(err) {
		t.Fatalf("Get after Delete: %v, want NotFound", err)
	}
	if err := c.Create(ctx, pod("b", "dry", "x"), kubeclient.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, pod("b", "p4", "x")); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, &list, kubeclient.InNamespace("b")); err != nil || len(list.Items) != 2 {
		t.Fatalf("List in b after a Create = %v, %v", list.Items, err)
	}
}
