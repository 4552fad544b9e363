package migrate

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/netpool/netpool/internal/kubeclient/crclient"
)

func wbPoolObject(ns, name, rng string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"range": rng, "allocations": map[string]any{
		"1": map[string]any{"id": "c1", "podref": "ns/p1", "ifname": "net1"}}}}}
	u.SetGroupVersionKind(wbPoolKind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// TestLockAndUnlock: the lock rewrites only spec.range (and annotates), is idempotent, creates a
// missing pool locked, refuses a pool of another range, and unlocking gives the range back.
func TestLockAndUnlock(t *testing.T) {
	ctx := context.Background()
	subnet := netip.MustParsePrefix("10.0.0.0/24")
	c := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithObjects(wbPoolObject("kube-system", "n-10.0.0.0-24", "10.0.0.0/24"),
		wbPoolObject("kube-system", "other-10.0.0.0-24", "10.9.0.0/24")).Build()
	get := func(name string) *unstructured.Unstructured {
		t.Helper()
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(wbPoolKind)
		if err := c.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: name}, u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	if did, err := lockPool(ctx, crclient.Client(c), "kube-system", "n-10.0.0.0-24", subnet); err != nil || !did {
		t.Fatalf("lock: %t, %v", did, err)
	}
	u := get("n-10.0.0.0-24")
	if rng, _, _ := unstructured.NestedString(u.Object, "spec", "range"); rng != lockedRangePrefix+"10.0.0.0/24" || u.GetAnnotations()[lockAnnotation] == "" {
		t.Fatalf("locked pool: range %q, annotations %v", rng, u.GetAnnotations())
	}
	if a, _, _ := unstructured.NestedMap(u.Object, "spec", "allocations"); len(a) != 1 {
		t.Errorf("the lock changed the allocations: %v", a)
	}
	if did, err := lockPool(ctx, crclient.Client(c), "kube-system", "n-10.0.0.0-24", subnet); err != nil || did {
		t.Errorf("a second lock: %t, %v; want nothing done", did, err)
	}
	if err := unlockPool(ctx, crclient.Client(c), "kube-system", "n-10.0.0.0-24", subnet); err != nil {
		t.Fatal(err)
	}
	u = get("n-10.0.0.0-24")
	if rng, _, _ := unstructured.NestedString(u.Object, "spec", "range"); rng != "10.0.0.0/24" || u.GetAnnotations()[lockAnnotation] != "" {
		t.Errorf("unlocked pool: range %q, annotations %v", rng, u.GetAnnotations())
	}
	if did, err := lockPool(ctx, crclient.Client(c), "kube-system", "new-10.0.0.0-24", subnet); err != nil || !did {
		t.Fatalf("lock of a missing pool: %t, %v", did, err)
	}
	if rng, _, _ := unstructured.NestedString(get("new-10.0.0.0-24").Object, "spec", "range"); rng != lockedRangePrefix+"10.0.0.0/24" {
		t.Errorf("created pool has range %q", rng)
	}
	if _, err := lockPool(ctx, crclient.Client(c), "kube-system", "other-10.0.0.0-24", subnet); err == nil || !strings.Contains(err.Error(), `has range "10.9.0.0/24", not 10.0.0.0/24: not locked`) {
		t.Errorf("lock of a pool of another range: %v", err)
	}
}
