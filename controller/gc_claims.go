package controller

import (
	"context"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// ipamClaimKind is the kind whose deletion releases the addresses it owns.
var ipamClaimKind = schema.GroupKind{Group: ipamclaimsv1.GroupName, Kind: "IPAMClaim"}

// reservationOwnerField indexes reservations by their persistent owner (ReservationOwner.Key):
// a deleted claim finds its addresses.
const reservationOwnerField = "spec.owner"

func reservationOwner(obj client.Object) []string {
	r, ok := obj.(*ipamv1.OverlappingRangeIPReservation)
	if !ok || r.Spec.Owner == nil {
		return nil
	}
	return []string{r.Spec.Owner.Key()}
}

// reservationsOfClaim maps a claim's deletion to the reservations it owns.
func (r *gcReconciler) reservationsOfClaim(ctx context.Context, obj client.Object) []reconcile.Request {
	key := ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: obj.GetNamespace(), Name: obj.GetName()}.Key()
	var list ipamv1.OverlappingRangeIPReservationList
	if err := r.Client.List(ctx, &list, client.MatchingFields{reservationOwnerField: key}, client.UnsafeDisableDeepCopy); err != nil {
		logf.FromContext(ctx).Error(err, "Listing the reservations of an IPAMClaim failed", "claim", key)
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}}
	}
	return reqs
}
