package kubestore

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// maxBindAttempts bounds the read-modify-write of one re-bind or unbind that loses to another
// writer of the same reservation (a migration's source and target at once).
const maxBindAttempts = 3

var _ allocator.PersistentTxn = (*txn)(nil)

// PersistentOwner is the attachment's IPAMClaim, when its config allows persistent IPs and its
// network selection element references one, or else its StatefulSet identity (namespace,
// StatefulSet, ordinal, interface), when the call's pools are sticky and a StatefulSet controls
// the pod; read once per call.
// The call's config is the one bound at Bind (its resolved copy); c is the same call's.
func (t *txn) PersistentOwner(ctx context.Context, _ *ipam.Config, owner allocator.Owner) (string, error) {
	b := t.b
	if !b.cfg.AllowPersistentIPs && !b.sticky {
		return "", nil
	}
	if !b.claimResolved {
		u, err := b.s.resolvePersistent(ctx, b.cfg, owner, b.sticky)
		if err != nil {
			return "", err
		}
		b.claim, b.claimResolved = u, true
	}
	if b.claim == nil {
		return "", nil
	}
	return b.claim.owner.Key(), nil
}

// claimFor returns the call's claim if it is the persistent owner key.
func (t *txn) claimFor(key string) (*claimUse, error) {
	if c := t.b.claim; c != nil && c.owner.Key() == key {
		return c, nil
	}
	return nil, fmt.Errorf("%w: persistent owner %s was not resolved by this call", allocator.ErrStoreUnusable, key)
}

// Rebind binds al.Owner to the reservation the persistent owner holds in the pool: this node's,
// found in the index, or, when this node holds none, the one at an address the claim's status
// lists or (a StatefulSet owner, which has no status) the one the owner label finds (read live),
// which this node then takes over. A reservation found at such an address that has another owner
// is not the owner's: the claim's status is stale, and an address is claimed anew. With a
// requested al.Addr, an address the owner holds elsewhere is released (giveUpForRequest) and
// Rebind reports false, so that the requested address is claimed for the owner.
func (t *txn) Rebind(ctx context.Context, p allocator.Pool, al *allocator.Allocation) (bool, error) {
	u, err := t.beginClaim(ctx, p, al.Owner)
	if err != nil {
		return false, err
	}
	cu, err := t.claimFor(al.Persistent)
	if err != nil {
		return false, err
	}
	s := t.b.s
	var names []string
	if e, ok := s.index.persistentIn(u.state.name, al.Persistent); ok {
		names = append(names, e.name)
	}
	for _, a := range cu.hints {
		if p.Range.Subnet.Contains(a) {
			names = append(names, ipamv1.ReservationName(u.scope, a))
		}
	}
	if cu.claim == nil && len(names) == 0 {
		found, err := s.ownerReservations(ctx, u.state.name, cu.owner)
		if err != nil {
			return false, err
		}
		for _, r := range found {
			names = append(names, r.Name)
		}
	}
	requested := al.Addr
	for _, name := range names {
		if requested.IsValid() && name != ipamv1.ReservationName(u.scope, requested) {
			if err := s.giveUpForRequest(ctx, name, cu.owner, s.userOf(al), requested); err != nil {
				return false, err
			}
			continue
		}
		r, err := s.bindUser(ctx, name, cu.owner, s.userOf(al))
		if err != nil {
			return false, err
		}
		if r == nil {
			continue
		}
		addr, _ := addrOf(r)
		al.Addr, al.Created = addr, r.CreationTimestamp.UTC()
		cu.bound[p.Key] = netip.PrefixFrom(addr, p.Range.Subnet.Bits())
		return true, nil
	}
	return false, nil
}

// userOf is the spec.users entry of al's attachment on this node.
func (s *Store) userOf(al *allocator.Allocation) ipamv1.ReservationUser {
	u := ipamv1.ReservationUser{ContainerID: al.Owner.ContainerID, IfName: al.Owner.IfName, PodUID: al.Pod.UID, Node: s.node}
	if al.Pod.Namespace != "" && al.Pod.Name != "" {
		u.PodRef = al.Pod.Namespace + "/" + al.Pod.Name
	}
	return u
}

// bindUser makes user the holder of reservation name, if owner owns it, and returns it; nil when
// it does not exist or has another owner. The reservation moves to this node (spec.node and the
// node label) with its other users kept: a migration's source still runs. Node isolation
// (deploy/base/agent-admission.yaml) lets a node take over a persistently owned reservation, but
// not drop the users of the node it takes it from. When spec.users is full, the oldest users of
// other nodes go first.
func (s *Store) bindUser(ctx context.Context, name string, owner ipamv1.ReservationOwner, user ipamv1.ReservationUser) (*ipamv1.OverlappingRangeIPReservation, error) {
	for attempt := 1; ; attempt++ {
		r := &ipamv1.OverlappingRangeIPReservation{}
		// This node's own reservations are in the cache (a VM restarted here costs no read); one
		// of another node, or a cached copy that lost an update, is read live.
		var reader client.Reader = s.client
		if attempt > 1 {
			reader = s.live
		}
		err := s.retry(ctx, "read reservation "+name, func(ctx context.Context) error {
			return reader.Get(ctx, client.ObjectKey{Name: name}, r)
		})
		if apierrors.IsNotFound(err) && attempt == 1 {
			err = s.retry(ctx, "read reservation "+name, func(ctx context.Context) error {
				return s.live.Get(ctx, client.ObjectKey{Name: name}, r)
			})
		}
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, apiFailure("read reservation "+name, err)
		}
		if !r.Spec.Owner.Is(owner) || r.DeletionTimestamp != nil {
			return nil, nil
		}
		users, err := s.withUser(r, user)
		if err != nil {
			return nil, err
		}
		r.Spec.Users = users
		r.Spec.ContainerID, r.Spec.IfName, r.Spec.PodRef, r.Spec.PodUID = user.ContainerID, user.IfName, user.PodRef, user.PodUID
		r.Spec.Node = s.node
		if r.Labels == nil {
			r.Labels = map[string]string{}
		}
		r.Labels[ipamv1.NodeLabel] = ipamv1.LabelValue(s.node)
		err = s.retry(ctx, "bind reservation "+name, func(ctx context.Context) error {
			return s.client.Update(ctx, r)
		})
		if err == nil {
			s.index.put(r)
			return r, nil
		}
		if !apierrors.IsConflict(err) || attempt == maxBindAttempts {
			return nil, apiFailure("bind reservation "+name, err)
		}
	}
}

// withUser is r's users with user added (replacing its earlier entry). Node isolation lets a node
// drop only its own node's users (another node's pod may run on the address: a migration's source,
// whose entry the controller removes once the pod is gone), so when spec.users is full this node's
// oldest entries make room, and a list full of other nodes' users is an error to retry.
func (s *Store) withUser(r *ipamv1.OverlappingRangeIPReservation, user ipamv1.ReservationUser) ([]ipamv1.ReservationUser, error) {
	users := []ipamv1.ReservationUser{}
	for _, x := range r.Spec.Users {
		if x.ContainerID != user.ContainerID || x.IfName != user.IfName {
			users = append(users, x)
		}
	}
	for len(users) >= ipamv1.MaxReservationUsers {
		i := slices.IndexFunc(users, func(x ipamv1.ReservationUser) bool { return x.Node == s.node })
		if i < 0 {
			return nil, fmt.Errorf("%w: reservation %s (%s) has %d users on other nodes; the controller removes those whose pods are gone",
				allocator.ErrStoreBusy, r.Name, r.Spec.Address, len(users))
		}
		users = slices.Delete(users, i, i+1)
	}
	return append(users, user), nil
}

// Unbind removes owner from the users of its persistently owned reservation in the pool. The
// reservation stays, with no user when owner was the last. A reservation another node has taken
// over since is that node's: this node only forgets it.
func (t *txn) Unbind(ctx context.Context, key string, owner allocator.Owner) (allocator.Allocation, bool, error) {
	if !t.writable {
		return allocator.Allocation{}, false, errReadOnly
	}
	u, err := t.settled(ctx, key, owner)
	if err != nil {
		return allocator.Allocation{}, false, err
	}
	s := t.b.s
	var e entry
	found := false
	for _, x := range s.index.owned(u.state.name, owner) {
		if x.persistent != "" {
			e, found = x, true
			break
		}
	}
	if !found {
		return allocator.Allocation{}, false, nil
	}
	if err := s.removeUser(ctx, e.name, e.uid, owner); err != nil {
		return allocator.Allocation{}, false, err
	}
	return allocationOf(key, u, e), true, nil
}

// removeUser removes owner's entry of this node from the users of the persistently owned
// reservation name (the object uid, when set), which stays held by its owner: the DEL of a bound
// attachment, and the undoing of a failed ADD, since node isolation lets no agent delete a
// persistently owned reservation (its owner's end releases it, through the controller). A
// reservation gone, made anew, or taken over by another node since is only forgotten.
func (s *Store) removeUser(ctx context.Context, name string, uid types.UID, owner allocator.Owner) error {
	for attempt := 1; ; attempt++ {
		r := &ipamv1.OverlappingRangeIPReservation{}
		err := s.retry(ctx, "read reservation "+name, func(ctx context.Context) error {
			return s.live.Get(ctx, client.ObjectKey{Name: name}, r)
		})
		if apierrors.IsNotFound(err) || err == nil && uid != "" && r.UID != uid {
			s.index.remove(name, uid, false)
			return nil
		}
		if err != nil {
			return apiFailure("read reservation "+name, err)
		}
		if r.Spec.Node != s.node {
			s.index.remove(name, "", false)
			return nil
		}
		if !r.DropUsers(func(x ipamv1.ReservationUser) bool {
			return x.ContainerID == owner.ContainerID && x.IfName == owner.IfName && x.Node == s.node
		}) {
			s.index.put(r)
			return nil
		}
		err = s.retry(ctx, "unbind reservation "+name, func(ctx context.Context) error {
			return s.client.Update(ctx, r)
		})
		if err == nil {
			s.index.put(r)
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == maxBindAttempts {
			return apiFailure("unbind reservation "+name, err)
		}
	}
}
