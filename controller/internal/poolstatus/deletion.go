package poolstatus

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// deletionRecheck is how often a deleted pool that waits for its reservations is checked again
// besides the reservation events that queue it: the decision to let it go is made on a live list,
// and a reservation the cache has not seen yet sends no delete event.
const deletionRecheck = 30 * time.Second

// specPoolField is the selectable field (a field selector the API server answers) of reservations
// and slices that names their pool.
const specPoolField = "spec.pool"

// poolDeletion is what the deletion phase of a reconcile found.
type poolDeletion struct {
	// blocked is set when the pool is deleted and reservations still name it.
	blocked bool
	// done is set when nothing is left to reconcile: the finalizer is off, or not ours to remove.
	done bool
}

// reconcileDeletion puts IPPoolFinalizer on a pool that lacks it and, on a deleted pool, removes it
// once no reservation names the pool, after deleting the pool's slices. Until then the pool stays
// and the status says why (setDeletionBlocked).
func (r *Reconciler) reconcileDeletion(ctx context.Context, pool *ipamv1.IPPool) (poolDeletion, error) {
	if pool.DeletionTimestamp.IsZero() {
		if controllerutil.ContainsFinalizer(pool, ipamv1.IPPoolFinalizer) {
			return poolDeletion{}, nil
		}
		if err := r.patchFinalizer(ctx, pool, controllerutil.AddFinalizer); err != nil {
			return poolDeletion{}, fmt.Errorf("failed to add the finalizer to IPPool %s: %w", pool.Name, err)
		}
		return poolDeletion{}, nil
	}
	if !controllerutil.ContainsFinalizer(pool, ipamv1.IPPoolFinalizer) {
		return poolDeletion{done: true}, nil // only another party's finalizer holds it
	}
	held, err := r.reservationsHeld(ctx, pool.Name)
	if err != nil {
		return poolDeletion{}, err
	}
	if held {
		return poolDeletion{blocked: true}, nil
	}
	if err := r.deleteSlices(ctx, pool.Name); err != nil {
		return poolDeletion{}, err
	}
	logf.FromContext(ctx).Info("Removing the finalizer of a deleted pool: no reservation names it", "pool", pool.Name)
	if err := r.patchFinalizer(ctx, pool, controllerutil.RemoveFinalizer); err != nil {
		return poolDeletion{}, fmt.Errorf("failed to remove the finalizer of IPPool %s: %w", pool.Name, err)
	}
	return poolDeletion{done: true}, nil
}

// patchFinalizer adds or removes IPPoolFinalizer with a patch conditional on the pool's
// resourceVersion: a merge patch replaces the whole finalizers list, so an unconditional one could
// drop a finalizer another party added meanwhile. pool is updated from the answer. A pool already
// gone is no error.
func (r *Reconciler) patchFinalizer(ctx context.Context, pool *ipamv1.IPPool,
	edit func(client.Object, string) bool) error {
	orig := pool.DeepCopy()
	edit(pool, ipamv1.IPPoolFinalizer)
	err := r.Client.Patch(ctx, pool, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// reservationsHeld reports whether any reservation names pool, asking the API server rather than
// the cache: a cache that lags could show none while one exists, and letting the pool go then
// would leave that reservation dangling.
func (r *Reconciler) reservationsHeld(ctx context.Context, pool string) (bool, error) {
	var list ipamv1.OverlappingRangeIPReservationList
	if err := r.live().List(ctx, &list, client.MatchingFields{specPoolField: pool}, client.Limit(1)); err != nil {
		return false, fmt.Errorf("failed to list the reservations of IPPool %s: %w", pool, err)
	}
	return len(list.Items) > 0, nil
}

// deleteSlices deletes the slices of a pool that holds no reservation: they only steer the
// allocation of a pool that is going away.
func (r *Reconciler) deleteSlices(ctx context.Context, pool string) error {
	var list ipamv1.IPPoolSliceList
	if err := r.live().List(ctx, &list, client.MatchingFields{specPoolField: pool}); err != nil {
		return fmt.Errorf("failed to list the slices of IPPool %s: %w", pool, err)
	}
	for i := range list.Items {
		s := &list.Items[i]
		if err := r.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to delete slice %s of the deleted IPPool %s: %w", s.Name, pool, err)
		}
	}
	return nil
}

func (r *Reconciler) live() client.Reader {
	if r.Live != nil {
		return r.Live
	}
	return r.Client
}

// setDeletionBlocked says on a deleted pool that held reservations keep it: DeletionBlocked True,
// and Ready False (nothing should be allocated from a pool that is going away). held is the
// reservation count, at least one.
func setDeletionBlocked(p *ipamv1.IPPool, held int64) {
	msg := fmt.Sprintf("Deletion waits until no reservation names the pool: %d held "+
		"(kubectl get overlappingrangeipreservations.ipam.netpool.io --field-selector spec.pool=%s); "+
		"the finalizer %s is removed when they are released", max(held, 1), p.Name, ipamv1.IPPoolFinalizer)
	for _, typ := range []string{ipamv1.IPPoolDeletionBlockedCondition, ipamv1.IPPoolReadyCondition} {
		c := metav1.Condition{
			Type: typ, Status: metav1.ConditionTrue, Reason: ipamv1.IPPoolReservationsHeldReason,
			Message: msg, ObservedGeneration: p.Generation,
		}
		if typ == ipamv1.IPPoolReadyCondition {
			c.Status = metav1.ConditionFalse
		}
		meta.SetStatusCondition(&p.Status.Conditions, c)
	}
}
