package gcpolicy

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// Delete releases r by a delete conditional on its UID, so a reservation of the same name made
// since (the address claimed anew by an ADD) is never touched. It reports whether this call
// released r: false, without error, when r was gone already (a DEL came, or another release) or
// its name now holds another claim.
func Delete(ctx context.Context, c client.Writer, r *ipamv1.OverlappingRangeIPReservation) (bool, error) {
	uid := r.UID
	err := c.Delete(ctx, r, client.Preconditions{UID: &uid})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("failed to release reservation %s (%s of IPPool %s): %w", r.Name, r.Spec.Address, r.Spec.Pool, err)
	}
	return true, nil
}
