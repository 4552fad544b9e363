package gcpolicy

import (
	"context"
	"fmt"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// ownerExists reports whether a reservation's persistent owner exists. A claim being deleted
// still exists: its address goes once it is gone.
func ownerExists(ctx context.Context, c client.Reader, o ipamv1.ReservationOwner) (bool, error) {
	switch o.Kind {
	case ipamv1.OwnerIPAMClaim:
		key := client.ObjectKey{Namespace: o.Namespace, Name: o.Name}
		err := c.Get(ctx, key, &ipamclaimsv1.IPAMClaim{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("failed to get IPAMClaim %s: %w", key, err)
		}
		return true, nil
	}
	// An owner of a kind this version does not know is kept: releasing it could free a live address.
	return true, nil
}
