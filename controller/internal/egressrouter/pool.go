package egressrouter

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/controller/internal/index"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	networkv1 "github.com/netpool/netpool/crds/network/v1"
	"github.com/netpool/netpool/internal/ippool"
	"github.com/netpool/netpool/ipam"
)

// The router's claims in its spec.pool. Each router address is one OverlappingRangeIPReservation
// under the name the IPAM agent would use (ReservationName with the scope the pool model gives the
// pool's recorded overlappingRanges mode: the network by default, else the pool), so the agent's
// Create of that address gets AlreadyExists and moves on: no pod is handed it. The reservation
// carries no pod (GC keeps reservations without a podRef) and the label RouterUIDLabel; node
// reclaim skips it. The router's finalizer releases it once the router's pod is gone.
//
// This file is the only place that knows how a pool is read and claimed from; it uses the pool
// rules that exist today (poolRange over ipam.ParseRange, ipamv1 naming) so it can move onto the
// shared pool model as a whole.

// egressReservationNode is the spec.node of a router's reservations: the field is required, and
// no node holds the address (the router's pod may run on any node, and move).
const egressReservationNode = "egress-router." + networkv1.GroupName

// egressIfName is the spec.ifName of a router's reservations: the pod's egress interface.
const egressIfName = egressInterface

// egressAllocateAttempts bounds how many taken addresses (held in another pool of the same
// network, which the pool's own reservations do not show) an allocation steps over before it
// reports the pool exhausted.
const egressAllocateAttempts = 64

// egressProblem is why the router cannot reach its spec: the Degraded reason and message. It is
// reported, not retried with backoff.
type egressProblem struct {
	reason  string
	message string
}

func (p *egressProblem) Error() string { return p.reason + ": " + p.message }

// egressContainerID is the spec.containerID of a router's reservations: it names the router.
func egressContainerID(r *networkv1.EgressRouter) string {
	return "egress-router." + r.Namespace + "." + r.Name
}

// routerClaims lists the reservations the router holds, from the cache.
func (e *Reconciler) routerClaims(ctx context.Context, r *networkv1.EgressRouter) ([]ipamv1.OverlappingRangeIPReservation, error) {
	var list ipamv1.OverlappingRangeIPReservationList
	if err := e.Client.List(ctx, &list, client.MatchingFields{reservationRouterField: string(r.UID)}); err != nil {
		return nil, fmt.Errorf("failed to list the reservations of router %s/%s: %w", r.Namespace, r.Name, err)
	}
	return list.Items, nil
}

// claimPoolAddresses claims the router's addresses in spec.pool, or allocates one when
// spec.addresses is empty, and returns the addresses the router uses and the names of the
// reservations that hold them. A problem of the pool or an address is an *egressProblem.
func (e *Reconciler) claimPoolAddresses(ctx context.Context, r *networkv1.EgressRouter) ([]networkv1.EgressRouterAddress, []string, error) {
	pool := &ipamv1.IPPool{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: r.Spec.Pool}, pool); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, &egressProblem{networkv1.ReasonPoolNotFound, fmt.Sprintf("IPPool %s does not exist", r.Spec.Pool)}
		}
		return nil, nil, fmt.Errorf("failed to get IPPool %s: %w", r.Spec.Pool, err)
	}
	rng, err := ippool.RangeOf(&pool.Spec)
	if err != nil {
		return nil, nil, &egressProblem{networkv1.ReasonPoolInvalid, fmt.Sprintf("IPPool %s: %v", pool.Name, err)}
	}
	if err := e.admitRouter(ctx, r, pool); err != nil {
		return nil, nil, err
	}
	mine, err := e.routerClaims(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	if len(r.Spec.Addresses) == 0 {
		return e.allocate(ctx, r, pool, rng, mine)
	}
	var names []string
	inFamily := false
	for _, a := range r.Spec.Addresses {
		p, err := netip.ParsePrefix(a.IP)
		if err != nil {
			return nil, nil, &egressProblem{networkv1.ReasonPoolInvalid, fmt.Sprintf("address %s is not a CIDR", a.IP)}
		}
		addr := p.Addr().Unmap()
		if (addr.Is4() && rng.Family() != 4) || (addr.Is6() && rng.Family() != 6) {
			continue // a dual-stack router's other family is not the pool's business
		}
		inFamily = true
		if err := rng.Allowed(addr); err != nil {
			return nil, nil, &egressProblem{networkv1.ReasonAddressNotInPool, fmt.Sprintf("address %s cannot be claimed in IPPool %s: %v", addr, pool.Name, err)}
		}
		name, err := e.claim(ctx, r, pool, addr)
		if err != nil {
			return nil, nil, err
		}
		names = append(names, name)
	}
	if !inFamily {
		return nil, nil, &egressProblem{networkv1.ReasonPoolInvalid, fmt.Sprintf("IPPool %s (range %s) has no address family of the router's addresses", pool.Name, pool.Spec.Range)}
	}
	return r.Spec.Addresses, names, nil
}

// allocate returns the address the router already holds in pool, or claims the first free one.
func (e *Reconciler) allocate(ctx context.Context, r *networkv1.EgressRouter, pool *ipamv1.IPPool, rng ipam.Range,
	mine []ipamv1.OverlappingRangeIPReservation) ([]networkv1.EgressRouterAddress, []string, error) {
	if pool.Spec.Gateway == "" {
		return nil, nil, &egressProblem{networkv1.ReasonPoolInvalid, fmt.Sprintf("IPPool %s has no gateway, which an allocated router address needs", pool.Name)}
	}
	address := func(a netip.Addr) []networkv1.EgressRouterAddress {
		return []networkv1.EgressRouterAddress{{IP: netip.PrefixFrom(a, rng.Subnet.Bits()).String(), Gateway: pool.Spec.Gateway}}
	}
	held := func(claims []ipamv1.OverlappingRangeIPReservation) (netip.Addr, string) {
		for _, res := range claims {
			if a, err := netip.ParseAddr(res.Spec.Address); err == nil && res.Spec.Pool == pool.Name && rng.Contains(a) {
				return a, res.Name
			}
		}
		return netip.Addr{}, ""
	}
	if a, name := held(mine); name != "" {
		return address(a), []string{name}, nil
	}
	// The cache may not show an allocation made a moment ago: ask the API server before
	// allocating another, or a router could end up holding two.
	var live ipamv1.OverlappingRangeIPReservationList
	if err := e.Live.List(ctx, &live, client.MatchingLabels{networkv1.RouterUIDLabel: string(r.UID)}); err != nil {
		return nil, nil, fmt.Errorf("failed to list the reservations of router %s/%s: %w", r.Namespace, r.Name, err)
	}
	if a, name := held(live.Items); name != "" {
		return address(a), []string{name}, nil
	}
	var list ipamv1.OverlappingRangeIPReservationList
	if err := e.Client.List(ctx, &list, client.MatchingLabels{ipamv1.PoolLabel: ipamv1.LabelValue(pool.Name)}); err != nil {
		return nil, nil, fmt.Errorf("failed to list the reservations of IPPool %s: %w", pool.Name, err)
	}
	var taken []netip.Addr
	for i := range list.Items {
		if a, err := netip.ParseAddr(list.Items[i].Spec.Address); err == nil {
			taken = append(taken, a.Unmap())
		}
	}
	slices.SortFunc(taken, func(a, b netip.Addr) int { return a.Compare(b) })
	isTaken := func(a netip.Addr) bool {
		_, found := slices.BinarySearchFunc(taken, a, func(x, y netip.Addr) int { return x.Compare(y) })
		return found
	}
	// An address a node released under the pool's reuse cool-down comes after every other free
	// one, the one released longest ago first (allocator/cooldown.go).
	cooling, err := e.poolCooling(ctx, pool)
	if err != nil {
		return nil, nil, err
	}
	cools := map[netip.Addr]bool{}
	for _, c := range cooling {
		cools[c.Addr] = true
	}
	candidates := func(yield func(netip.Addr) bool) {
		for a, ok := rng.NextAllowed(rng.Start); ok; a, ok = rng.NextAllowed(a.Next()) {
			if (!isTaken(a) && !cools[a] && !yield(a)) || !a.Next().IsValid() {
				return
			}
		}
		for _, c := range cooling {
			if rng.Allowed(c.Addr) == nil && !isTaken(c.Addr) && !yield(c.Addr) {
				return
			}
		}
	}
	misses := 0
	for a := range candidates {
		name, err := e.claim(ctx, r, pool, a)
		if err == nil {
			return address(a), []string{name}, nil
		}
		if p, ok := err.(*egressProblem); !ok || p.reason != networkv1.ReasonAddressInUse {
			return nil, nil, err
		}
		if misses++; misses >= egressAllocateAttempts {
			break
		}
	}
	return nil, nil, &egressProblem{networkv1.ReasonPoolExhausted, fmt.Sprintf("IPPool %s (range %s) has no free address", pool.Name, pool.Spec.Range)}
}

// poolCooling returns the addresses of pool that nodes record as cooling on their slices, released
// longest ago first, from the cache.
func (e *Reconciler) poolCooling(ctx context.Context, pool *ipamv1.IPPool) ([]ippool.Cooling, error) {
	cooldown, err := ippool.Cooldown(pool)
	if err != nil {
		return nil, &egressProblem{networkv1.ReasonPoolInvalid, err.Error()}
	}
	if cooldown == 0 {
		return nil, nil
	}
	var list ipamv1.IPPoolSliceList
	if err := e.Client.List(ctx, &list, client.MatchingFields{index.SlicePool: pool.Name}); err != nil {
		return nil, fmt.Errorf("failed to list the slices of IPPool %s: %w", pool.Name, err)
	}
	return ippool.CoolingIn(list.Items, cooldown, time.Now()), nil
}

// claim creates the reservation of addr in pool for the router, or finds it already the router's.
// An address held by anyone else is an AddressInUse problem naming the holder.
func (e *Reconciler) claim(ctx context.Context, r *networkv1.EgressRouter, pool *ipamv1.IPPool, addr netip.Addr) (string, error) {
	res := &ipamv1.OverlappingRangeIPReservation{
		ObjectMeta: metav1.ObjectMeta{
			Name: ipamv1.ReservationName(ippool.ReservationScope(pool.Name, pool.Spec.NetworkName, ippool.Overlapping(pool)), addr),
			Labels: map[string]string{
				ipamv1.PoolLabel:         ipamv1.LabelValue(pool.Name),
				networkv1.RouterUIDLabel: string(r.UID),
			},
		},
		Spec: ipamv1.OverlappingRangeIPReservationSpec{
			Address:     addr.String(),
			Pool:        pool.Name,
			ContainerID: egressContainerID(r),
			IfName:      egressIfName,
			Node:        egressReservationNode,
			NetworkName: pool.Spec.NetworkName,
		},
	}
	err := e.Client.Create(ctx, res)
	if err == nil {
		e.Recorder.Eventf(r, res, "Normal", EventEgressAddressClaimed, actionClaim, "claimed %s in IPPool %s", addr, pool.Name)
		return res.Name, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("failed to create reservation %s: %w", res.Name, err)
	}
	held := &ipamv1.OverlappingRangeIPReservation{}
	if err := e.Live.Get(ctx, client.ObjectKey{Name: res.Name}, held); err != nil {
		return "", fmt.Errorf("failed to get reservation %s: %w", res.Name, err)
	}
	if held.Labels[networkv1.RouterUIDLabel] == string(r.UID) {
		return held.Name, nil
	}
	holder := held.Spec.ContainerID
	if held.Spec.PodRef != "" {
		holder = "pod " + held.Spec.PodRef
	}
	return "", &egressProblem{networkv1.ReasonAddressInUse, fmt.Sprintf("address %s in IPPool %s is held by %s (reservation %s)", addr, pool.Name, holder, held.Name)}
}

// releaseClaims deletes the router's reservations whose names are not in keep. The caller makes
// sure no pod of the router may still hold them.
func (e *Reconciler) releaseClaims(ctx context.Context, r *networkv1.EgressRouter, keep []string) error {
	mine, err := e.routerClaims(ctx, r)
	if err != nil {
		return err
	}
	for i := range mine {
		res := &mine[i]
		if slices.Contains(keep, res.Name) {
			continue
		}
		err := e.Client.Delete(ctx, res, client.Preconditions{UID: &res.UID})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to release reservation %s: %w", res.Name, err)
		}
		e.Recorder.Eventf(r, res, "Normal", EventEgressAddressReleased, actionRelease, "released %s in IPPool %s", res.Spec.Address, res.Spec.Pool)
	}
	return nil
}
