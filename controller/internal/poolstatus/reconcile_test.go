package poolstatus

import (
	"context"
	"math/big"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// The pool status reconciler's error paths and write throttle, over a fake client.

func newStatusReconciler(t *testing.T, c client.Client, clk *ctrltest.Clock) *Reconciler {
	t.Helper()
	return &Reconciler{Client: c, Metrics: ctrltest.MustMetrics(t), Interval: time.Second, Now: clk.Now, tally: newPoolTally()}
}

// statusWritesCounted is a fake client holding objs that counts its status writes in writes.
func statusWritesCounted(t *testing.T, writes *int, objs ...client.Object) client.Client {
	t.Helper()
	return ctrltest.FakeClient(t, interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
		*writes++
		return c.SubResource(sub).Patch(ctx, obj, p, opts...)
	}}, objs...)
}

func poolRequest(name string) ctrl.Request {
	return ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}
}

func TestPoolStatusReconcileFailures(t *testing.T) {
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}, Spec: ipamv1.IPPoolSpec{Range: "10.0.0.0/24"}}
	gr := schema.GroupResource{Group: ipamv1.GroupName, Resource: "ippools"}
	tests := []struct {
		name    string
		funcs   interceptor.Funcs
		wantErr string
	}{
		{name: "get", wantErr: "failed to get IPPool p: injected failure",
			funcs: interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return ctrltest.ErrExpected
			}}},
		{name: "list peers", wantErr: `failed to list the IPPools of network "": injected failure`,
			funcs: interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
				return ctrltest.ErrExpected
			}}},
		{name: "status write", wantErr: "failed to update the status of IPPool p: injected failure",
			funcs: interceptor.Funcs{SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
				return ctrltest.ErrExpected
			}}},
		{name: "deleted before the status write is no error",
			funcs: interceptor.Funcs{SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
				return apierrors.NewNotFound(gr, "p")
			}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newStatusReconciler(t, ctrltest.FakeClient(t, tt.funcs, pool.DeepCopy()), ctrltest.NewClock())
			_, err := r.Reconcile(context.Background(), poolRequest("p"))
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestPoolStatusWritesAtMostOncePerInterval(t *testing.T) {
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}, Spec: ipamv1.IPPoolSpec{Range: "10.0.0.0/29"}}
	writes := 0
	c := statusWritesCounted(t, &writes, pool)
	clk := ctrltest.NewClock()
	r := newStatusReconciler(t, c, clk)
	ctx := context.Background()
	mustReconcile := func(want ctrl.Result) {
		t.Helper()
		got, err := r.Reconcile(ctx, poolRequest("p"))
		if err != nil || got != want {
			t.Fatalf("Reconcile = %+v, %v; want %+v", got, err, want)
		}
	}

	mustReconcile(ctrl.Result{})
	mustReconcile(ctrl.Result{}) // nothing changed: no write
	r.tally.add("p", 1)
	clk.Advance(300 * time.Millisecond)
	mustReconcile(ctrl.Result{RequeueAfter: 700 * time.Millisecond}) // changed, but written a moment ago
	if writes != 1 {
		t.Fatalf("%d status writes, want 1", writes)
	}
	clk.Advance(700 * time.Millisecond)
	mustReconcile(ctrl.Result{})
	got := &ipamv1.IPPool{}
	if err := c.Get(ctx, client.ObjectKey{Name: "p"}, got); err != nil {
		t.Fatal(err)
	}
	if writes != 2 || *got.Status.Allocated != 1 || got.Status.Free != "5" {
		t.Fatalf("%d writes, status %+v; want 2 writes and 1 allocated, 5 free", writes, got.Status)
	}
	if v := ctrltest.Value(t, r.Metrics.PoolFree.WithLabelValues("p")); v != 5 {
		t.Fatalf("free gauge %v, want 5", v)
	}

	// The pool goes: its series and its throttle go too.
	if err := c.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	mustReconcile(ctrl.Result{})
	if n := ctrltest.Series(r.Metrics.PoolCapacity); n != 0 {
		t.Fatalf("%d capacity series after the pool went, want 0", n)
	}
	if len(r.lastWrite) != 0 {
		t.Fatalf("the throttle still remembers %v", r.lastWrite)
	}
}

func TestPoolStatusOfAnUnparsablePoolDropsItsCapacitySeries(t *testing.T) {
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}, Spec: ipamv1.IPPoolSpec{Range: "10.0.0.0/24", Gateway: "gw"}}
	r := newStatusReconciler(t, ctrltest.FakeClient(t, interceptor.Funcs{}, pool), ctrltest.NewClock())
	r.Metrics.SetPool("p", big.NewInt(1), 0, big.NewInt(1))
	if _, err := r.Reconcile(context.Background(), poolRequest("p")); err != nil {
		t.Fatal(err)
	}
	if n := ctrltest.Series(r.Metrics.PoolCapacity); n != 0 {
		t.Fatalf("an unparsable pool kept %d capacity series", n)
	}
}

func TestPoolsOfNetwork(t *testing.T) {
	blue1 := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "blue-1"}, Spec: ipamv1.IPPoolSpec{Range: "10.0.0.0/24", NetworkName: "blue"}}
	blue2 := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "blue-2"}, Spec: ipamv1.IPPoolSpec{Range: "10.0.1.0/24", NetworkName: "blue"}}
	red := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "red"}, Spec: ipamv1.IPPoolSpec{Range: "10.0.0.0/24", NetworkName: "red"}}
	r := newStatusReconciler(t, ctrltest.FakeClient(t, interceptor.Funcs{}, blue1, blue2, red), ctrltest.NewClock())
	if got := ctrltest.RequestNames(r.poolsOfNetwork(context.Background(), blue1)); got != "blue-1 blue-2" {
		t.Fatalf("requests %q, want the blue pools", got)
	}
	failing := newStatusReconciler(t, ctrltest.FakeClient(t, interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		return ctrltest.ErrExpected
	}}), ctrltest.NewClock())
	if got := ctrltest.RequestNames(failing.poolsOfNetwork(context.Background(), blue1)); got != "blue-1" {
		t.Fatalf("requests %q after a list error, want the pool itself", got)
	}
	if err := (&Reconciler{}).SetupWithManager(nil); err == nil {
		t.Fatal("SetupWithManager without a client succeeded")
	}
}
