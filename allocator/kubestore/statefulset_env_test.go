package kubestore

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
	"github.com/netpool/netpool/test/envtest"
)

// TestStatefulSetsAreThePools: statefulSets is the pool's. A derived pool records its first
// config's; a config that leaves it out follows the pool; one stating the other value is refused
// (CNI error 7, naming both). In a sticky pool, a StatefulSet pod whose ordinal cannot be told and
// a pod that does not exist fail ADD with their own errors, changing nothing.
func TestStatefulSetsAreThePools(t *testing.T) {
	env := envtest.Shared(t)
	ctx := context.Background()
	n := &node{store: MustStart(t, env, "node-sts-pool", Options{}, nil)}
	const base = `,"network_name":"sts-derived","range":"10.146.0.0/24"`
	n.mustAdd(t, conf("net-sts", base+`,"statefulSets":"Sticky"`), "a")
	got := &ipamv1.IPPool{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "sts-derived-10.146.0.0-24"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.StatefulSets != ipamv1.StatefulSetsSticky {
		t.Fatalf("the derived pool records statefulSets %q, want Sticky", got.Spec.StatefulSets)
	}
	if _, err := n.add(conf("net-sts", base), "", "b"); err != nil {
		t.Errorf("ADD by a config that leaves statefulSets out = %v, want it to follow the pool", err)
	}
	_, err := n.add(conf("net-sts", base+`,"statefulSets":"None"`), "", "c")
	want := "statefulSets None disagrees with IPPool sts-derived-10.146.0.0-24, which records statefulSets Sticky"
	if !errors.Is(err, ipam.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
		t.Errorf("ADD stating None = %v, want a config error containing %q", err, want)
	}

	sticky := conf("net-sts", base)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cache-x",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "cache", UID: "u", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c"}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	before := len(reservations(t, env))
	for _, tt := range []struct {
		pod  string
		is   error
		want string
	}{
		{"cache-x", allocator.ErrPersistentOwnerInvalid, `pod default/cache-x of StatefulSet cache: ordinal "x" (from its name) is not a number`},
		{"gone-0", allocator.ErrPersistentOwnerNotFound, "pod default/gone-0 does not exist, so its StatefulSet (statefulSets: Sticky) cannot be read"},
	} {
		_, err := n.add(sticky, "K8S_POD_NAMESPACE=default;K8S_POD_NAME="+tt.pod, "d-"+tt.pod)
		if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ADD of pod %s = %v, want %v containing %q", tt.pod, err, tt.is, tt.want)
		}
	}
	if after := len(reservations(t, env)); after != before {
		t.Errorf("the refused ADDs changed the reservations from %d to %d", before, after)
	}
}
