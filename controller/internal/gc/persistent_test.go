package gc

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/controller/internal/release"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/podowner"
)

// TestGCReconcilePersistent: the GC removes the users whose pods are gone from a persistently
// owned reservation (a finished migration's source), keeps a scaled-down ordinal's address while
// its pod still runs, and releases it once the pod is gone.
func TestGCReconcilePersistent(t *testing.T) {
	clk := ctrltest.NewClock()
	sts := func(replicas int32) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas)}}
	}
	pod := func(uid, node string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db-1", UID: types.UID(uid), Labels: map[string]string{podowner.PodIndexLabel: "1"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}
	}
	src := ipamv1.ReservationUser{ContainerID: "src", IfName: "net1", PodRef: "apps/db-1", PodUID: "u-old", Node: "node-a"}
	dst := ipamv1.ReservationUser{ContainerID: "dst", IfName: "net1", PodRef: "apps/db-1", PodUID: "u-new", Node: "node-b"}
	res := func(users ...ipamv1.ReservationUser) *ipamv1.OverlappingRangeIPReservation {
		r := ctrltest.Aged(clk, ctrltest.NewReservation("p", "10.0.0.5", nil, "node-b"), time.Hour)
		r.Spec.Owner = &ipamv1.ReservationOwner{Kind: ipamv1.OwnerStatefulSet, Namespace: "apps", Name: "db", Ordinal: ptr.To[int32](1), Interface: "net1"}
		r.Spec.Users = users
		if len(users) > 0 {
			last := users[len(users)-1]
			r.Spec.ContainerID, r.Spec.PodRef, r.Spec.PodUID = last.ContainerID, last.PodRef, last.PodUID
		}
		return r
	}
	run := func(t *testing.T, objs ...client.Object) (client.Client, ctrl.Result, error) {
		t.Helper()
		c := ctrltest.FakeClient(t, interceptor.Funcs{}, objs...)
		r := &Reconciler{Client: c, Live: c, Metrics: ctrltest.MustMetrics(t), Grace: time.Minute, Now: clk.Now,
			Release: &release.Releaser{Client: c, Recorder: &ctrltest.FakeRecorder{}, Metrics: ctrltest.MustMetrics(t)}}
		got, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "p.10.0.0.5"}})
		return c, got, err
	}
	get := func(t *testing.T, c client.Client) *ipamv1.OverlappingRangeIPReservation {
		t.Helper()
		r := &ipamv1.OverlappingRangeIPReservation{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: "p.10.0.0.5"}, r); err != nil {
			return nil
		}
		return r
	}

	t.Run("the users whose pods are gone are removed", func(t *testing.T) {
		c, _, err := run(t, sts(3), pod("u-new", "node-b"), res(src, dst))
		if err != nil {
			t.Fatal(err)
		}
		r := get(t, c)
		if r == nil || len(r.Spec.Users) != 1 || r.Spec.Users[0] != dst || r.Spec.ContainerID != "dst" {
			t.Fatalf("after the GC: %+v, want dst alone", r)
		}
	})
	t.Run("a dry run removes nothing", func(t *testing.T) {
		c := ctrltest.FakeClient(t, interceptor.Funcs{}, sts(3), pod("u-new", "node-b"), res(src, dst))
		r := &Reconciler{Client: c, Live: c, Metrics: ctrltest.MustMetrics(t), Grace: time.Minute, Now: clk.Now,
			Release: &release.Releaser{Client: c, Recorder: &ctrltest.FakeRecorder{}, Metrics: ctrltest.MustMetrics(t), DryRun: true}}
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "p.10.0.0.5"}}); err != nil {
			t.Fatal(err)
		}
		if got := get(t, c); got == nil || len(got.Spec.Users) != 2 {
			t.Fatalf("a dry run changed the users: %+v", got)
		}
	})
	t.Run("scaled down while the pod runs: kept", func(t *testing.T) {
		c, _, err := run(t, sts(1), pod("u-new", "node-b"), res(dst))
		if err != nil || get(t, c) == nil {
			t.Fatalf("the address of a running pod was released (%v)", err)
		}
	})
	t.Run("scaled down, the pod gone: released", func(t *testing.T) {
		c, _, err := run(t, sts(1), res(dst))
		if err != nil || get(t, c) != nil {
			t.Fatalf("the address of a scaled-down ordinal whose pod is gone stays (%v)", err)
		}
	})
}
