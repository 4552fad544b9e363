package gcpolicy

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/kubeclient"
)

// Delete releases r by a delete conditional on its UID and, when r carries one, its
// resourceVersion: a reservation of the same name made since (the address claimed anew by an ADD)
// is never touched, nor one changed since it was judged (an attachment bound to a persistently
// owned address meanwhile). It reports whether this call released r: false, without error, when r
// was gone already (a DEL came, or another release), its name now holds another claim, or it
// changed (to be judged again).
func Delete(ctx context.Context, c kubeclient.Writer, r *ipamv1.OverlappingRangeIPReservation) (bool, error) {
	pre := kubeclient.Preconditions{UID: &r.UID}
	if r.ResourceVersion != "" {
		pre.ResourceVersion = &r.ResourceVersion
	}
	err := c.Delete(ctx, r, pre)
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("failed to release reservation %s (%s of IPPool %s): %w", r.Name, r.Spec.Address, r.Spec.Pool, err)
	}
	return true, nil
}

// Prune removes stale, users whose pods are gone (StaleUsers), from r, a persistently owned
// reservation as read with its resourceVersion, by an update that fails if r changed since. It
// reports whether it removed them: false, without error, when r changed or is gone (to be judged
// again).
func Prune(ctx context.Context, c kubeclient.Writer, r *ipamv1.OverlappingRangeIPReservation, stale []StaleUser) (bool, error) {
	pruned := r.DeepCopy()
	if !pruned.DropUsers(func(u ipamv1.ReservationUser) bool {
		for _, s := range stale {
			if s.User == u {
				return true
			}
		}
		return false
	}) {
		return false, nil
	}
	err := c.Update(ctx, pruned)
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("failed to remove %d users whose pods are gone from reservation %s (%s): %w", len(stale), r.Name, r.Spec.Address, err)
	}
	*r = *pruned
	return true, nil
}
