package gc

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/controller/internal/release"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// The GC reconciler's decisions and error paths, over fake clients: cache and API server can
// disagree, and each can fail.

func TestGCReconcile(t *testing.T) {
	clk := ctrltest.NewClock()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	newRes := func(age time.Duration) *ipamv1.OverlappingRangeIPReservation {
		return ctrltest.Aged(clk, ctrltest.NewReservation("p", "10.0.0.5", pod, "n"), age)
	}
	failGet := func(kind string) interceptor.Funcs {
		return interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if strings.HasSuffix(ctrltest.TypeName(obj), kind) {
				return ctrltest.ErrExpected
			}
			return c.Get(ctx, key, obj, opts...)
		}}
	}
	tests := []struct {
		name        string
		cache, live []client.Object
		cacheFuncs  interceptor.Funcs
		liveFuncs   interceptor.Funcs
		wantResult  ctrl.Result
		wantErr     string
		wantGone    bool
	}{
		{name: "reservation gone: nothing to do"},
		{name: "the cache fails", cache: []client.Object{newRes(time.Hour)}, cacheFuncs: failGet("OverlappingRangeIPReservation"),
			wantErr: "failed to get reservation p.10.0.0.5: injected failure"},
		{name: "young: judged again after the grace", cache: []client.Object{newRes(10 * time.Second)},
			wantResult: ctrl.Result{RequeueAfter: 50 * time.Second}},
		{name: "the cached pod cannot be read", cache: []client.Object{newRes(time.Hour)}, cacheFuncs: failGet("Pod"),
			wantErr: "failed to get pod ns/web: injected failure"},
		{name: "the cache lags: the API server has the pod", cache: []client.Object{newRes(time.Hour)}, live: []client.Object{newRes(time.Hour), pod.DeepCopy()}},
		{name: "the API server cannot be read", cache: []client.Object{newRes(time.Hour)}, live: []client.Object{newRes(time.Hour)}, liveFuncs: failGet("Pod"),
			wantErr: "failed to get pod ns/web: injected failure"},
		{name: "the reservation cannot be read from the API server", cache: []client.Object{newRes(time.Hour)}, liveFuncs: failGet("OverlappingRangeIPReservation"),
			wantErr: "failed to get reservation p.10.0.0.5: injected failure"},
		{name: "the API server has released it already", cache: []client.Object{newRes(time.Hour)}},
		{name: "both agree the pod is gone", cache: []client.Object{newRes(time.Hour)}, live: []client.Object{newRes(time.Hour)}, wantGone: true},
		{name: "no pod identity", cache: []client.Object{ctrltest.Aged(clk, ctrltest.NewReservation("p", "10.0.0.5", nil, "n"), time.Hour)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := ctrltest.FakeClient(t, interceptor.Funcs{}, tt.cache...)
			cache := interceptor.NewClient(base, tt.cacheFuncs)
			r := &Reconciler{
				Client: cache, Live: ctrltest.FakeClient(t, tt.liveFuncs, tt.live...), Metrics: ctrltest.MustMetrics(t), Grace: time.Minute, Now: clk.Now,
				Release: &release.Releaser{Client: cache, Recorder: &ctrltest.FakeRecorder{}, Metrics: ctrltest.MustMetrics(t)},
			}
			got, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "p.10.0.0.5"}})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if got != tt.wantResult {
				t.Fatalf("result %+v, want %+v", got, tt.wantResult)
			}
			if len(tt.cache) > 0 {
				err := base.Get(context.Background(), client.ObjectKey{Name: "p.10.0.0.5"}, &ipamv1.OverlappingRangeIPReservation{})
				if (err != nil) != tt.wantGone {
					t.Fatalf("reservation released = %v, want %v", err != nil, tt.wantGone)
				}
			}
		})
	}
}

func TestGCReconcileKeepsAReservationWhoseNetworkStatusDoesNotParse(t *testing.T) {
	clk := ctrltest.NewClock()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1", Annotations: map[string]string{
			"k8s.v1.cni.cncf.io/network-status": "{broken",
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	res := ctrltest.Aged(clk, ctrltest.NewReservation("p", "10.0.0.5", pod, "n"), time.Hour)
	cache := ctrltest.FakeClient(t, interceptor.Funcs{}, res, pod)
	r := &Reconciler{Client: cache, Live: cache, Metrics: ctrltest.MustMetrics(t), Grace: time.Minute, Now: clk.Now,
		Release: &release.Releaser{Client: cache, Recorder: &ctrltest.FakeRecorder{}, Metrics: ctrltest.MustMetrics(t)}}
	got, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: res.Name}})
	if err != nil || got != (ctrl.Result{}) {
		t.Fatalf("Reconcile = %+v, %v; want to keep it quietly", got, err)
	}
	if err := cache.Get(context.Background(), client.ObjectKeyFromObject(res), res); err != nil {
		t.Fatalf("the reservation was released: %v", err)
	}
}

func TestGCReservationsOfPod(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}}
	c := ctrltest.FakeClient(t, interceptor.Funcs{},
		ctrltest.NewReservation("p", "10.0.0.5", pod, "n"), ctrltest.NewReservation("p", "10.0.0.6", pod, "n"), ctrltest.NewReservation("p", "10.0.0.7", other, "n"))
	r := &Reconciler{Client: c}
	if got := r.reservationsOfPod(context.Background(), pod); len(got) != 2 {
		t.Fatalf("requests %v, want the two reservations of ns/web", got)
	}
	failing := ctrltest.FakeClient(t, interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		return ctrltest.ErrExpected
	}})
	if got := (&Reconciler{Client: failing}).reservationsOfPod(context.Background(), pod); got != nil {
		t.Fatalf("requests %v after a list error, want none", got)
	}
}

func TestGCSetupNeedsItsParts(t *testing.T) {
	if err := (&Reconciler{}).SetupWithManager(nil); err == nil {
		t.Fatal("SetupWithManager without a client succeeded")
	}
}
