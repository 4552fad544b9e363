package gc

import (
	"context"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/netpool/netpool/controller/internal/index"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// ipamClaimKind is the kind whose deletion releases the addresses it owns.
var ipamClaimKind = schema.GroupKind{Group: ipamclaimsv1.GroupName, Kind: "IPAMClaim"}

// reservationsOfClaim maps a claim's deletion to the reservations it owns.
func (r *Reconciler) reservationsOfClaim(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.reservationsOfOwner(ctx, ipamv1.OwnerIPAMClaim, obj)
}

// reservationsOfStatefulSet maps a StatefulSet's deletion or change of replicas to the
// reservations of its ordinals.
func (r *Reconciler) reservationsOfStatefulSet(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.reservationsOfOwner(ctx, ipamv1.OwnerStatefulSet, obj)
}

func (r *Reconciler) reservationsOfOwner(ctx context.Context, kind ipamv1.ReservationOwnerKind, obj client.Object) []reconcile.Request {
	key := ipamv1.ReservationOwner{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}.ObjectKey()
	var list ipamv1.OverlappingRangeIPReservationList
	if err := r.Client.List(ctx, &list, client.MatchingFields{index.ReservationOwner: key}, client.UnsafeDisableDeepCopy); err != nil {
		logf.FromContext(ctx).Error(err, "Listing the reservations of a persistent owner failed", "owner", key)
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}}
	}
	return reqs
}

// statefulSetShrunk passes a StatefulSet's deletion and an update that lowers its replicas: the
// changes that can end an ordinal's sticky address. Its creation (the controller's start lists
// every reservation anyway) and other updates cannot.
func statefulSetShrunk() predicate.Funcs {
	replicas := func(obj client.Object) int32 {
		if s, ok := obj.(*appsv1.StatefulSet); ok && s.Spec.Replicas != nil {
			return *s.Spec.Replicas
		}
		return 1
	}
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(e event.UpdateEvent) bool { return replicas(e.ObjectNew) < replicas(e.ObjectOld) },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
