package egressrouter

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/controller/internal/index"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	networkv1 "github.com/netpool/netpool/crds/network/v1"
	"github.com/netpool/netpool/internal/scheme"
)

// The EgressRouter reconciler's API failure paths, over a fake client that injects them: each is
// returned (for the workqueue's backoff) with a message naming the call and the object.

func TestEgressRouterReconcileErrors(t *testing.T) {
	router := func(pool string) *networkv1.EgressRouter {
		r := statusRouter()
		r.Finalizers = []string{networkv1.ReleaseAddressFinalizer}
		r.Spec.Pool = pool
		return r
	}
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: ipamv1.IPPoolSpec{Range: "192.168.12.0/24", Gateway: "192.168.12.1", NetworkName: "ext"}}
	selective := pool.DeepCopy()
	selective.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	failList := func(kind string) interceptor.Funcs {
		return interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if strings.HasSuffix(ctrltest.TypeName(list), "."+kind) {
				return ctrltest.ErrExpected
			}
			return c.List(ctx, list, opts...)
		}}
	}
	of := func(kind string) func(obj any) bool {
		return func(obj any) bool { return strings.HasSuffix(ctrltest.TypeName(obj), "."+kind) }
	}
	failGet := func(match func(any) bool) interceptor.Funcs {
		return interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if match(obj) {
				return ctrltest.ErrExpected
			}
			return c.Get(ctx, key, obj, opts...)
		}}
	}
	tests := []struct {
		name    string
		objs    []client.Object
		funcs   interceptor.Funcs
		live    interceptor.Funcs
		wantErr string
	}{
		{name: "the router cannot be read", objs: []client.Object{router("")}, funcs: failGet(of("EgressRouter")),
			wantErr: "failed to get EgressRouter ns/er: injected failure"},
		{name: "the finalizer cannot be added", objs: []client.Object{func() client.Object { r := router(""); r.Finalizers = nil; return r }()},
			funcs: interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
				return ctrltest.ErrExpected
			}},
			wantErr: "failed to add the finalizer of EgressRouter ns/er: injected failure"},
		{name: "a child cannot be read", objs: []client.Object{router("")}, funcs: failGet(of("Service")),
			wantErr: "failed to get Service ns/er: injected failure"},
		{name: "the NAD cannot be applied", objs: []client.Object{router("")},
			funcs: interceptor.Funcs{Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
				return ctrltest.ErrExpected
			}},
			wantErr: "failed to apply NAD ns/er: injected failure"},
		{name: "the pod cannot be read live", objs: []client.Object{router("")}, live: failGet(of("Pod")),
			wantErr: "failed to get pod ns/er: injected failure"},
		{name: "the pod cannot be created", objs: []client.Object{router("")},
			funcs: interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if _, ok := obj.(*corev1.Pod); ok {
					return ctrltest.ErrExpected
				}
				return c.Create(ctx, obj, opts...)
			}},
			wantErr: "failed to create pod ns/er: injected failure"},
		{name: "the status cannot be written", objs: []client.Object{router("")},
			funcs: interceptor.Funcs{SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
				return ctrltest.ErrExpected
			}},
			wantErr: "failed to update the status of EgressRouter ns/er: injected failure"},
		{name: "the pool cannot be read", objs: []client.Object{router("p"), pool}, funcs: failGet(of("IPPool")),
			wantErr: "failed to get IPPool p: injected failure"},
		{name: "the address cannot be claimed", objs: []client.Object{router("p"), pool},
			funcs: interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
				return ctrltest.ErrExpected
			}},
			wantErr: "failed to create reservation ext.192.168.12.99: injected failure"},
		{name: "the router's claims cannot be listed", objs: []client.Object{router("p"), pool},
			funcs:   failList("OverlappingRangeIPReservationList"),
			wantErr: "failed to list the reservations of router ns/er: injected failure"},
		{name: "the pool's peers cannot be listed", objs: []client.Object{router("p"), pool},
			funcs:   failList("IPPoolList"),
			wantErr: `failed to list the IPPools of network "ext": injected failure`},
		{name: "the namespace cannot be read", objs: []client.Object{router("p"), selective},
			funcs: failGet(of("Namespace")), live: failGet(of("Namespace")),
			wantErr: "failed to get namespace ns: injected failure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := egressFakeClient(t, tt.funcs, tt.objs...)
			e := &Reconciler{Client: c, Live: egressFakeClient(t, tt.live), Recorder: &ctrltest.FakeRecorder{}, Image: "img"}
			if tt.live.Get == nil {
				e.Live = c
			}
			_, err := e.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "er"}})
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("got %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// egressFakeClient is fakeClient with the EgressRouter status subresource and the reconciler's index.
func egressFakeClient(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) client.WithWatch {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&networkv1.EgressRouter{}, &ipamv1.IPPool{}).WithInterceptorFuncs(funcs).
		WithIndex(&ipamv1.OverlappingRangeIPReservation{}, reservationRouterField, func(obj client.Object) []string {
			return []string{obj.GetLabels()[networkv1.RouterUIDLabel]}
		}).
		WithIndex(&ipamv1.IPPool{}, index.PoolNetwork, index.PoolNetworks).Build()
}
