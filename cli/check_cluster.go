package cli

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/netpool/netpool/cli/migrate"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/ippool"
	"github.com/netpool/netpool/internal/kubeclient"
)

// The kinds of finding `netpoolctl check` reports in a cluster (docs/cli-output.md).
const (
	// findingDuplicateAddress: two reservations hold one address in one uniqueness scope.
	findingDuplicateAddress = "DuplicateAddress"
	// findingWrongName: a reservation is not named ReservationName(scope, address), so it is not
	// the lock the allocator takes for its address.
	findingWrongName = "WrongName"
	// findingUnknownPool: a reservation names an IPPool that does not exist.
	findingUnknownPool = "UnknownPool"
	// findingInvalidPool: a pool's spec does not parse, so nothing in it can be checked.
	findingInvalidPool = "InvalidPool"
	// findingNotInPool: a reservation's address is one its pool cannot hand out (outside the
	// range or window, excluded, the gateway, a network or broadcast address).
	findingNotInPool = "NotInPool"
	// findingSliceUnknownPool: a slice names an IPPool that does not exist.
	findingSliceUnknownPool = "SliceUnknownPool"
	// findingSliceOutsidePool: a slice's range does not lie inside its pool's range.
	findingSliceOutsidePool = "SliceOutsidePool"
	// findingSliceUnknownNode: a slice belongs to a Node that does not exist.
	findingSliceUnknownNode = "SliceUnknownNode"
	// findingStatusCounts: a pool's status.capacity, allocated or free is not what the
	// controller's counting gives.
	findingStatusCounts = "StatusCounts"
	// migrate.KindHeldTwice and migrate.KindWhereaboutsOnly are findings too: an address held
	// by whereabouts and by netpool for another attachment, or by whereabouts only.
)

// whereaboutsMode says whether check compares whereabouts' records with netpool's.
type whereaboutsMode int

const (
	// whereaboutsAuto compares them when the API server serves whereabouts' kinds.
	whereaboutsAuto whereaboutsMode = iota
	whereaboutsOn
	whereaboutsOff
)

// clusterChecker checks the pools, reservations and slices of a cluster.
type clusterChecker struct {
	client kubeclient.Reader
	// network and oneNetwork limit the check to the pools of one network name.
	network    string
	oneNetwork bool
	// whereabouts: whether to compare whereabouts' records too (migrate.Verify).
	whereabouts whereaboutsMode

	report checkReport
}

func (c *clusterChecker) add(kind, object, format string, args ...any) {
	c.report.Findings = append(c.report.Findings, checkFinding{Kind: kind, Object: object, Message: fmt.Sprintf(format, args...)})
}

func (c *clusterChecker) run(ctx context.Context) (checkReport, error) {
	c.report = checkReport{docHeader: docHeader{APIVersion: schemaVersion, Kind: "CheckReport", Source: "cluster"}, Store: "cluster", Findings: []checkFinding{}}
	var pools ipamv1.IPPoolList
	var reservations ipamv1.OverlappingRangeIPReservationList
	var poolSlices ipamv1.IPPoolSliceList
	var nodes corev1.NodeList
	for _, l := range []struct {
		what string
		list kubeclient.ObjectList
	}{{"IPPools", &pools}, {"reservations", &reservations}, {"IPPoolSlices", &poolSlices}, {"Nodes", &nodes}} {
		if err := c.client.List(ctx, l.list); err != nil {
			return checkReport{}, fmt.Errorf("failed to list the %s: %w", l.what, err)
		}
	}
	// exists holds every pool; byName the pools being checked (all, or one network's).
	exists := map[string]bool{}
	byName := map[string]*ipamv1.IPPool{}
	parsed := map[string]*ippool.Pool{}
	for i := range pools.Items {
		p := &pools.Items[i]
		exists[p.Name] = true
		if c.oneNetwork && p.Spec.NetworkName != c.network {
			continue
		}
		byName[p.Name] = p
		c.report.Pools++
		pp, err := ippool.Parse(p)
		if err != nil {
			c.add(findingInvalidPool, "ippool/"+p.Name, "the spec does not parse, so its reservations and slices cannot be checked: %v", err)
			continue
		}
		parsed[p.Name] = pp
	}
	if c.oneNetwork && len(byName) == 0 {
		networks := make([]string, 0, len(pools.Items))
		for _, p := range pools.Items {
			networks = append(networks, p.Spec.NetworkName)
		}
		return checkReport{}, fmt.Errorf("--network: %w", unknownNetwork(c.network, "cluster", networks))
	}
	counts := c.checkReservations(reservations.Items, exists, byName, parsed)
	c.checkSlices(poolSlices.Items, nodes.Items, exists, byName, parsed)
	c.checkStatus(pools.Items, byName, counts)
	if c.whereabouts != whereaboutsOff {
		if err := c.checkWhereabouts(ctx, byName); err != nil {
			return checkReport{}, err
		}
	}
	return c.report, nil
}

// checkWhereabouts reports every address that whereabouts and netpool hold for different
// attachments, or that whereabouts holds in a netpool pool that netpool does not: the window of a
// migration (docs/migrate-from-whereabouts.md). migrate.Verify is the one home of the comparison.
func (c *clusterChecker) checkWhereabouts(ctx context.Context, byName map[string]*ipamv1.IPPool) error {
	v, err := migrate.Verify(ctx, c.client)
	if errors.Is(err, migrate.ErrWhereaboutsNotInstalled) && c.whereabouts == whereaboutsAuto {
		return nil
	}
	if err != nil {
		return fmt.Errorf("comparing whereabouts' records with netpool's (--whereabouts=false skips it): %w", err)
	}
	c.report.Whereabouts = v.Holdings
	for _, d := range v.Discrepancies {
		if byName[d.Pool] == nil {
			continue // a pool of another network
		}
		object := "whereabouts/" + d.Whereabouts
		if d.Reservation != "" {
			object = "overlappingrangeipreservation/" + d.Reservation
		}
		c.add(d.Kind, object, "%s", d.Message)
	}
	return nil
}

// checkReservations checks each reservation against its pool and the others of its scope, and
// returns how many reservations each pool holds.
func (c *clusterChecker) checkReservations(items []ipamv1.OverlappingRangeIPReservation, exists map[string]bool,
	byName map[string]*ipamv1.IPPool, parsed map[string]*ippool.Pool) map[string]int64 {
	counts := map[string]int64{}
	type held struct {
		scope string
		addr  netip.Addr
	}
	holders := map[held][]*ipamv1.OverlappingRangeIPReservation{}
	var order []held
	for i := range items {
		r := &items[i]
		obj := "overlappingrangeipreservation/" + r.Name
		pool, ok := byName[r.Spec.Pool]
		switch {
		case exists[r.Spec.Pool] && !ok:
			continue // a pool of another network
		case !ok && (!c.oneNetwork || r.Spec.NetworkName == c.network):
			c.report.Allocations++
			c.add(findingUnknownPool, obj, "%s is reserved in IPPool %s, which does not exist", r.Spec.Address, r.Spec.Pool)
			continue
		case !ok:
			continue
		}
		c.report.Allocations++
		counts[pool.Name]++
		a, err := netip.ParseAddr(r.Spec.Address)
		if err != nil {
			c.add(findingNotInPool, obj, "spec.address %q is not an IP address", r.Spec.Address)
			continue
		}
		a = a.Unmap()
		if pp := parsed[pool.Name]; pp != nil {
			if class, why := pp.Classify(a); class != ippool.AddressUsable {
				c.add(findingNotInPool, obj, "IPPool %s cannot hand out %s (%s): %s", pool.Name, a, class, why)
			}
		}
		scope := ippool.ReservationScope(pool.Name, pool.Spec.NetworkName, ippool.Overlapping(pool))
		if want := ipamv1.ReservationName(scope, a); r.Name != want {
			c.add(findingWrongName, obj, "it holds %s in scope %q, whose lock is named %s: the allocator would not see this claim",
				a, scope, want)
		}
		k := held{scope, a}
		if len(holders[k]) == 0 {
			order = append(order, k)
		}
		holders[k] = append(holders[k], r)
	}
	for _, k := range order {
		rs := holders[k]
		if len(rs) < 2 {
			continue
		}
		var names []string
		for _, r := range rs {
			names = append(names, fmt.Sprintf("%s (pod %s, container %s/%s, node %s)", r.Name, textOrNone(r.Spec.PodRef), r.Spec.ContainerID, r.Spec.IfName, r.Spec.Node))
		}
		slices.Sort(names)
		c.add(findingDuplicateAddress, "overlappingrangeipreservation/"+rs[0].Name, "%s is held %d times in scope %q: %s",
			k.addr, len(rs), k.scope, strings.Join(names, ", "))
	}
	return counts
}

func (c *clusterChecker) checkSlices(items []ipamv1.IPPoolSlice, nodes []corev1.Node, exists map[string]bool,
	byName map[string]*ipamv1.IPPool, parsed map[string]*ippool.Pool) {
	nodeNames := map[string]bool{}
	for _, n := range nodes {
		nodeNames[n.Name] = true
	}
	for i := range items {
		s := &items[i]
		obj := "ippoolslice/" + s.Name
		pool, ok := byName[s.Spec.Pool]
		if !ok && (c.oneNetwork || exists[s.Spec.Pool]) {
			continue // a pool of another network; or, with --network, no pool (a slice names no network)
		}
		c.report.Slices++
		if !nodeNames[s.Spec.Node] {
			c.add(findingSliceUnknownNode, obj, "it belongs to node %s, which does not exist", s.Spec.Node)
		}
		if !ok {
			c.add(findingSliceUnknownPool, obj, "block %s is carved from IPPool %s, which does not exist", s.Spec.Range, s.Spec.Pool)
			continue
		}
		pp := parsed[pool.Name]
		if pp == nil {
			continue
		}
		block, err := netip.ParsePrefix(s.Spec.Range)
		subnet := pp.Range.Subnet
		if err != nil || block.Addr().BitLen() != subnet.Addr().BitLen() || block.Bits() < subnet.Bits() || !subnet.Contains(block.Addr()) {
			c.add(findingSliceOutsidePool, obj, "block %s does not lie inside range %s of IPPool %s", s.Spec.Range, subnet, pool.Name)
		}
	}
}

// checkStatus compares each pool's status counts with the pool model's counts (ippool.CountsOf) of its spec and its
// reservations.
func (c *clusterChecker) checkStatus(pools []ipamv1.IPPool, byName map[string]*ipamv1.IPPool, counts map[string]int64) {
	for i := range pools {
		p := &pools[i]
		if byName[p.Name] == nil {
			continue
		}
		obj := "ippool/" + p.Name
		capacity, allocated, free := ippool.CountsOf(p, counts[p.Name]).Status()
		s := p.Status
		if s.Allocated == nil {
			c.add(findingStatusCounts, obj, "status.allocated is unset: the controller has not counted this pool's %d reservations (is it running?)", allocated)
			continue
		}
		if s.Capacity != capacity || *s.Allocated != allocated || s.Free != free {
			c.add(findingStatusCounts, obj, "status says capacity %s, allocated %d, free %s; the spec and the %d reservations give capacity %s, allocated %d, free %s",
				textOrNone(s.Capacity), *s.Allocated, textOrNone(s.Free), allocated, textOrNone(capacity), allocated, textOrNone(free))
		}
	}
}

func textOrNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
