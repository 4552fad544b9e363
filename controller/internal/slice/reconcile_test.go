package slice

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/controller/internal/release"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// The slice return's decisions and error paths, over a fake client.

func newSlice(name, cidr, node string) *ipamv1.IPPoolSlice {
	return &ipamv1.IPPoolSlice{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: ipamv1.IPPoolSliceSpec{Pool: "p", Range: cidr, Node: node}}
}

func sliceRequest(name string) ctrl.Request {
	req := ctrl.Request{}
	req.Name = name
	return req
}

func TestSliceReturn(t *testing.T) {
	clk := ctrltest.NewClock()
	objs := []client.Object{
		newSlice("p.0", "10.0.0.0/28", "a"),
		newSlice("p.1", "10.0.0.16/28", "a"),
		newSlice("p.bad", "not-a-cidr", "a"),
		ctrltest.NewReservation("p", "10.0.0.3", nil, "a"),
		ctrltest.NewReservation("p", "10.0.0.20", nil, "b"), // another node borrowed an address of a's block
	}
	c := ctrltest.FakeClient(t, interceptor.Funcs{}, objs...)
	r := &Reconciler{Client: c, Grace: time.Minute, Now: clk.Now,
		Release: &release.Releaser{Client: c, Recorder: &ctrltest.FakeRecorder{}, Metrics: ctrltest.MustMetrics(t)}}
	ctx := context.Background()
	reconcile := func(name string, want ctrl.Result) {
		t.Helper()
		got, err := r.Reconcile(ctx, sliceRequest(name))
		if err != nil || got != want {
			t.Fatalf("Reconcile(%s) = %+v, %v; want %+v", name, got, err, want)
		}
	}

	reconcile("p.0", ctrl.Result{})                          // holds a reservation of its node
	reconcile("p.1", ctrl.Result{RequeueAfter: time.Minute}) // empty for its node: wait
	reconcile("p.bad", ctrl.Result{})                        // cannot be judged: left alone
	reconcile("p.missing", ctrl.Result{})
	clk.Advance(30 * time.Second)
	reconcile("p.1", ctrl.Result{RequeueAfter: 30 * time.Second})
	clk.Advance(30 * time.Second)
	reconcile("p.1", ctrl.Result{})
	if n := ctrltest.CountExisting(t, c, objs[:3]); n != 2 {
		t.Fatalf("%d slices left, want 2 (p.1 returned)", n)
	}

	// A slice that fills again forgets its empty time.
	if err := c.Delete(ctx, ctrltest.NewReservation("p", "10.0.0.3", nil, "a")); err != nil {
		t.Fatal(err)
	}
	reconcile("p.0", ctrl.Result{RequeueAfter: time.Minute})
	if err := c.Create(ctx, ctrltest.NewReservation("p", "10.0.0.4", nil, "a")); err != nil {
		t.Fatal(err)
	}
	reconcile("p.0", ctrl.Result{})
	if len(r.emptySince) != 0 {
		t.Fatalf("empty marks %v, want none", r.emptySince)
	}
}

func TestSliceReturnFailures(t *testing.T) {
	sl := newSlice("p.1", "10.0.0.16/28", "a")
	tests := []struct {
		name    string
		funcs   interceptor.Funcs
		wantErr string
	}{
		{name: "get", wantErr: "failed to get slice p.1: injected failure",
			funcs: interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return ctrltest.ErrExpected
			}}},
		{name: "list", wantErr: "failed to list the reservations of node a in IPPool p: injected failure",
			funcs: interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
				return ctrltest.ErrExpected
			}}},
		{name: "delete", wantErr: "failed to give slice p.1 (10.0.0.16/28 of IPPool p) back: injected failure",
			funcs: interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
				return ctrltest.ErrExpected
			}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ctrltest.FakeClient(t, tt.funcs, sl.DeepCopy())
			clk := ctrltest.NewClock()
			r := &Reconciler{Client: c, Grace: time.Minute, Now: clk.Now,
				Release: &release.Releaser{Client: c, Recorder: &ctrltest.FakeRecorder{}, Metrics: ctrltest.MustMetrics(t)}}
			_, err := r.Reconcile(context.Background(), sliceRequest("p.1"))
			if err == nil {
				clk.Advance(time.Minute)
				_, err = r.Reconcile(context.Background(), sliceRequest("p.1"))
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestSlicesOfReservation(t *testing.T) {
	c := ctrltest.FakeClient(t, interceptor.Funcs{},
		newSlice("p.0", "10.0.0.0/28", "a"), newSlice("p.1", "10.0.0.16/28", "a"), newSlice("p.2", "10.0.0.32/28", "b"))
	r := &Reconciler{Client: c}
	if got := ctrltest.RequestNames(r.slicesOfReservation(context.Background(), ctrltest.NewReservation("p", "10.0.0.40", nil, "a"))); got != "p.0 p.1" {
		t.Fatalf("requests %q, want a's slices of p", got)
	}
	if got := r.slicesOfReservation(context.Background(), newSlice("x", "10.0.0.0/28", "a")); got != nil {
		t.Fatalf("a slice mapped to %v", got)
	}
	failing := &Reconciler{Client: ctrltest.FakeClient(t, interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		return ctrltest.ErrExpected
	}})}
	if got := failing.slicesOfReservation(context.Background(), ctrltest.NewReservation("p", "10.0.0.40", nil, "a")); got != nil {
		t.Fatalf("requests %v after a list error, want none", got)
	}
	if err := (&Reconciler{}).SetupWithManager(nil); err == nil {
		t.Fatal("SetupWithManager without a client succeeded")
	}
}

func TestSliceEmptyMarkIsPerIncarnation(t *testing.T) {
	clk := ctrltest.NewClock()
	r := &Reconciler{Now: clk.Now}
	first := newSlice("p.1", "10.0.0.16/28", "a")
	since := r.markEmpty(first)
	clk.Advance(time.Minute)
	if got := r.markEmpty(first); !got.Equal(since) {
		t.Fatalf("the same slice's mark moved from %s to %s", since, got)
	}
	again := first.DeepCopy()
	again.UID = "claimed-anew"
	if got := r.markEmpty(again); !got.Equal(clk.Now()) {
		t.Fatalf("a slice claimed anew under the same name kept the old mark %s", got)
	}
}
