package kubestore

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/podowner"
)

// statefulSetUse is the call's persistent owner for a StatefulSet pod in a sticky pool; nil for a
// pod no StatefulSet controls.
func statefulSetUse(pod *corev1.Pod, owner allocator.Owner) (*claimUse, error) {
	o, err := podowner.StatefulSet(pod, owner.IfName)
	if err != nil || o == nil {
		if err != nil {
			err = fmt.Errorf("%w: %w", allocator.ErrPersistentOwnerInvalid, err)
		}
		return nil, err
	}
	return &claimUse{owner: *o, pod: pod.Name, bound: map[string]netip.Prefix{}}, nil
}

// ownerReservations lists, live, the reservations of persistent owner o in pool: every node's,
// found by the owner label. A StatefulSet pod recreated on another node finds its address so; a
// node that holds it answers from its index first and never lists.
func (s *Store) ownerReservations(ctx context.Context, pool string, o ipamv1.ReservationOwner) ([]ipamv1.OverlappingRangeIPReservation, error) {
	var list ipamv1.OverlappingRangeIPReservationList
	sel := client.MatchingLabels{ipamv1.OwnerLabel: ipamv1.OwnerLabelValue(o.Key()), ipamv1.PoolLabel: ipamv1.LabelValue(pool)}
	err := s.retry(ctx, "list the reservations of "+o.Key(), func(ctx context.Context) error {
		return s.live.List(ctx, &list, sel)
	})
	if err != nil {
		return nil, apiFailure("list the reservations of "+o.Key(), err)
	}
	var out []ipamv1.OverlappingRangeIPReservation
	for _, r := range list.Items {
		if r.Spec.Owner.Is(o) && r.Spec.Pool == pool && r.DeletionTimestamp == nil {
			out = append(out, r)
		}
	}
	// The owner's address first: of two (a request replaced one), the other gives way and goes.
	slices.SortStableFunc(out, func(a, b ipamv1.OverlappingRangeIPReservation) int {
		switch {
		case ownerAddressOf(&b).givesWayTo(ownerAddressOf(&a)):
			return -1
		case ownerAddressOf(&a).givesWayTo(ownerAddressOf(&b)):
			return 1
		}
		return 0
	})
	return out, nil
}

// giveUpForRequest lets reservation name of persistent owner o go, so that the address the
// attachment requests becomes the owner's instead: a requested ips wins, and is remembered. An
// address still bound to another attachment is not taken from it. The reservation is not deleted
// here (node isolation lets no agent delete a persistently owned reservation, or a node could free
// another's address by taking it over first): unbound, it gives way to the requested one
// (ownerAddress), and the controller's GC releases it once the owner's pod is bound there.
func (s *Store) giveUpForRequest(ctx context.Context, name string, o ipamv1.ReservationOwner, user ipamv1.ReservationUser, requested netip.Addr) error {
	r := &ipamv1.OverlappingRangeIPReservation{}
	err := s.retry(ctx, "read reservation "+name, func(ctx context.Context) error {
		return s.live.Get(ctx, client.ObjectKey{Name: name}, r)
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return apiFailure("read reservation "+name, err)
	}
	if !r.Spec.Owner.Is(o) {
		return nil
	}
	for _, u := range r.Spec.Users {
		if u.ContainerID != user.ContainerID || u.IfName != user.IfName {
			return fmt.Errorf("%w: %s holds %s, still used by %s/%s on node %s, so it cannot move to the requested %s",
				allocator.ErrAttachmentConflict, o.Key(), r.Spec.Address, u.ContainerID, u.IfName, u.Node, requested)
		}
	}
	if len(r.Spec.Users) > 0 && r.Spec.Node == s.node {
		// This attachment itself was bound to it: it leaves, so that the old address is unbound.
		return s.removeUser(ctx, name, r.UID, allocator.Owner{ContainerID: user.ContainerID, IfName: user.IfName})
	}
	return nil
}
