package node

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/controller/internal/release"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// The node reclaim's decisions and error paths, over fake clients.

func TestNodeReclaim(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}
	slice := func() *ipamv1.IPPoolSlice {
		return &ipamv1.IPPoolSlice{ObjectMeta: metav1.ObjectMeta{Name: "p.1", UID: "s"}, Spec: ipamv1.IPPoolSliceSpec{Pool: "p", Range: "10.0.0.16/28", Node: "gone"}}
	}
	holdings := func() []client.Object {
		return []client.Object{ctrltest.NewReservation("p", "10.0.0.17", nil, "gone"), ctrltest.NewReservation("p", "10.0.0.5", nil, "alive"), slice()}
	}
	failOn := func(what string) interceptor.Funcs {
		fail := func(obj any) error {
			if strings.HasSuffix(ctrltest.TypeName(obj), "."+what) {
				return ctrltest.ErrExpected
			}
			return nil
		}
		return interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if err := fail(obj); err != nil {
					return err
				}
				return c.Get(ctx, key, obj, opts...)
			},
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if err := fail(list); err != nil {
					return err
				}
				return c.List(ctx, list, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				if err := fail(obj); err != nil {
					return err
				}
				return c.Delete(ctx, obj, opts...)
			},
		}
	}
	tests := []struct {
		name       string
		cache      []client.Object
		live       []client.Object
		funcs      interceptor.Funcs
		liveFuncs  interceptor.Funcs
		wantErr    string
		wantKept   int // objects of holdings still there
		wantResult ctrl.Result
	}{
		{name: "the node exists", cache: append(holdings(), node.DeepCopy()), wantKept: 3},
		{name: "the cache lags: the API server has the node", cache: holdings(), live: []client.Object{node.DeepCopy()}, wantKept: 3},
		{name: "the node cannot be read", cache: holdings(), funcs: failOn("Node"), wantKept: 3,
			wantErr: "failed to get node gone: injected failure"},
		{name: "the live node cannot be read", cache: holdings(), liveFuncs: failOn("Node"), wantKept: 3,
			wantErr: "failed to get node gone: injected failure"},
		{name: "gone: reservations and slices reclaimed", cache: holdings(), wantKept: 1},
		{name: "reservations cannot be listed", cache: holdings(), funcs: failOn("OverlappingRangeIPReservationList"), wantKept: 3,
			wantErr: "failed to list the reservations of node gone: injected failure"},
		{name: "slices cannot be listed", cache: holdings(), funcs: failOn("IPPoolSliceList"), wantKept: 2,
			wantErr: "failed to list the slices of node gone: injected failure"},
		{name: "a release fails, the rest goes on", cache: holdings(), funcs: failOn("OverlappingRangeIPReservation"), wantKept: 2,
			wantErr: "failed to release reservation p.10.0.0.17 (10.0.0.17 of IPPool p): injected failure"},
		{name: "a slice return fails", cache: holdings(), funcs: failOn("IPPoolSlice"), wantKept: 2,
			wantErr: "failed to give slice p.1 (10.0.0.16/28 of IPPool p) back: injected failure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := ctrltest.FakeClient(t, interceptor.Funcs{}, tt.cache...)
			cache := interceptor.NewClient(base, tt.funcs)
			clk := ctrltest.NewClock()
			r := &Reconciler{Client: cache, Live: ctrltest.FakeClient(t, tt.liveFuncs, tt.live...), Grace: time.Minute, Now: clk.Now,
				Release: &release.Releaser{Client: cache, Recorder: &ctrltest.FakeRecorder{}, Metrics: ctrltest.MustMetrics(t)}}
			req := ctrl.Request{}
			req.Name = "gone"
			got, err := r.Reconcile(context.Background(), req)
			if err == nil && got.RequeueAfter == time.Minute {
				clk.Advance(time.Minute) // found gone: reclaimed once gone for the grace
				got, err = r.Reconcile(context.Background(), req)
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if got != tt.wantResult {
				t.Fatalf("result %+v, want %+v", got, tt.wantResult)
			}
			if kept := ctrltest.CountExisting(t, base, holdings()); kept != tt.wantKept {
				t.Fatalf("%d of the holdings are left, want %d", kept, tt.wantKept)
			}
		})
	}
}

func TestNodeReclaimKeepsAReservationWhosePodRunsOnAnotherNode(t *testing.T) {
	clk := ctrltest.NewClock()
	elsewhere := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.PodSpec{NodeName: "node-a.example.com"}}
	onIt := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}, Spec: corev1.PodSpec{NodeName: "node-a"}}
	kept := ctrltest.NewReservation("p", "10.0.0.5", elsewhere, "node-a")
	released := ctrltest.NewReservation("p", "10.0.0.6", onIt, "node-a")
	c := ctrltest.FakeClient(t, interceptor.Funcs{}, elsewhere, onIt, kept, released)
	r := &Reconciler{Client: c, Live: c, Grace: time.Minute, Now: clk.Now,
		Release: &release.Releaser{Client: c, Recorder: &ctrltest.FakeRecorder{}, Metrics: ctrltest.MustMetrics(t)}}
	req := ctrl.Request{}
	req.Name = "node-a"
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if n := ctrltest.CountExisting(t, c, []client.Object{kept}); n != 1 {
		t.Fatal("the reservation of a pod running on node-a.example.com was released")
	}
	if n := ctrltest.CountExisting(t, c, []client.Object{released}); n != 0 {
		t.Fatal("the reservation of a pod bound to the deleted node stayed")
	}
}

func TestNodeReclaimWaitsForTheGraceAndForgetsANodeThatCameBack(t *testing.T) {
	clk := ctrltest.NewClock()
	c := ctrltest.FakeClient(t, interceptor.Funcs{}, ctrltest.NewReservation("p", "10.0.0.17", nil, "flaky"))
	r := &Reconciler{Client: c, Live: c, Grace: time.Minute, Now: clk.Now,
		Release: &release.Releaser{Client: c, Recorder: &ctrltest.FakeRecorder{}, Metrics: ctrltest.MustMetrics(t)}}
	req := ctrl.Request{}
	req.Name = "flaky"
	got, err := r.Reconcile(context.Background(), req)
	if err != nil || got.RequeueAfter != time.Minute {
		t.Fatalf("first sight of a missing node: %+v, %v; want to wait a minute", got, err)
	}
	clk.Advance(40 * time.Second)
	if got, _ := r.Reconcile(context.Background(), req); got.RequeueAfter != 20*time.Second {
		t.Fatalf("later: %+v, want the rest of the grace", got)
	}
	// The kubelet registers the node again: the clock starts over next time it goes.
	if err := c.Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "flaky"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), req); err != nil || len(r.goneSince) != 0 {
		t.Fatalf("a node that came back is still remembered as gone: %v, %v", r.goneSince, err)
	}
	if kept := ctrltest.CountExisting(t, c, []client.Object{ctrltest.NewReservation("p", "10.0.0.17", nil, "flaky")}); kept != 1 {
		t.Fatal("the node's reservation was reclaimed")
	}
}

func TestNodeOfObject(t *testing.T) {
	for _, tt := range []struct {
		obj  client.Object
		want string
	}{
		{ctrltest.NewReservation("p", "10.0.0.1", nil, "a"), "a"},
		{&ipamv1.IPPoolSlice{Spec: ipamv1.IPPoolSliceSpec{Node: "b"}}, "b"},
		{&corev1.Pod{}, ""},
		{ctrltest.NewReservation("p", "10.0.0.1", nil, ""), ""},
	} {
		if got := ctrltest.RequestNames(nodeOfObject(context.Background(), tt.obj)); got != tt.want {
			t.Errorf("nodeOfObject(%T) = %q, want %q", tt.obj, got, tt.want)
		}
	}
	if err := (&Reconciler{}).SetupWithManager(nil); err == nil {
		t.Fatal("SetupWithManager without a client succeeded")
	}
}
