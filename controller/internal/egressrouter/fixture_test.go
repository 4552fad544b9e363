package egressrouter

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	"github.com/netpool/netpool/controller/internal/poolstatus"
	networkv1 "github.com/netpool/netpool/crds/network/v1"
	"github.com/netpool/netpool/test/poll"
)

// Helpers of the EgressRouter envtest tests; the fixture's EgressRouter helpers (ctrltest) play
// the kubelet and Multus.

// startEgressManager starts a manager with the EgressRouter reconciler for the test and, when the
// test ends and before the manager stops, deletes the test's routers and waits until their
// finalizers have run.
func startEgressManager(t *testing.T, f *ctrltest.Fixture) *ctrltest.Manager {
	t.Helper()
	m := ctrltest.StartManager(t, nil, ctrltest.TestOptions(), func(d ctrltest.Deps) error {
		r := &Reconciler{Client: d.Mgr.GetClient(), Live: d.Mgr.GetAPIReader(), Recorder: d.Recorder, Image: DefaultImage,
			Workers: DefaultWorkers}
		if err := r.SetupWithManager(d.Mgr); err != nil {
			return err
		}
		// The pool status reconciler runs beside it, as in the controller: its status writes are
		// the pool events that bring a router waiting for an address back.
		ps := &poolstatus.Reconciler{Client: d.Mgr.GetClient(), Live: d.Mgr.GetAPIReader(), Metrics: d.Metrics,
			Interval: d.Options.PoolStatusInterval}
		return ps.SetupWithManager(d.Mgr)
	})
	t.Cleanup(func() {
		if err := f.C.DeleteAllOf(f.Ctx, &networkv1.EgressRouter{}, client.InNamespace(f.NS)); err != nil {
			t.Errorf("deleting the routers: %v", err)
			return
		}
		poll.Eventually(t, ctrltest.EgressTimeout, "routers deleted", func() error {
			var list networkv1.EgressRouterList
			if err := f.C.List(f.Ctx, &list, client.InNamespace(f.NS)); err != nil {
				return err
			}
			if len(list.Items) > 0 {
				return fmt.Errorf("%d routers remain", len(list.Items))
			}
			return nil
		})
		// envtest runs no garbage collector: the Services would outlive their routers.
		var services corev1.ServiceList
		if err := f.C.List(f.Ctx, &services, client.InNamespace(f.NS)); err != nil {
			t.Errorf("listing the services: %v", err)
		}
		for i := range services.Items {
			if err := f.C.Delete(f.Ctx, &services.Items[i]); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting service %s: %v", services.Items[i].Name, err)
			}
		}
	})
	return m
}

// checkOwned fails unless obj is controlled by r with blockOwnerDeletion.
func checkOwned(t *testing.T, obj client.Object, r *networkv1.EgressRouter) {
	t.Helper()
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.UID != r.UID || ref.Kind != "EgressRouter" || ref.APIVersion != "network.netpool.io/v1" ||
		ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Fatalf("%T %s: controller reference %+v, want router %s (%s) with blockOwnerDeletion", obj, obj.GetName(), ref, r.Name, r.UID)
	}
}
