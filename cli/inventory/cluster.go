package inventory

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/gcpolicy"
	"github.com/netpool/netpool/internal/ippool"
	"github.com/netpool/netpool/internal/kubeclient"
)

// Cluster reads a cluster's IPPools, reservations and slices, live from the API server.
type Cluster struct {
	Client kubeclient.Client
	// Now and Grace are what the controller's GC policy judges an owner with (gcpolicy.Judge).
	Now   func() time.Time
	Grace time.Duration
	// PageSize is how many reservations one List request returns; 0 means 500.
	PageSize int64
	// LiveCounts makes Pools count every pool's reservations now, one list of all of them,
	// instead of taking the controller's status.allocated of each pool that has one.
	LiveCounts bool
}

var _ Source = (*Cluster)(nil)

// Kind is "cluster".
func (c *Cluster) Kind() string { return "cluster" }

// Close does nothing: the client holds no connection of its own to close.
func (c *Cluster) Close() error { return nil }

// defaultPageSize is how many reservations one List request returns: a cluster holds one object
// per address, and pages keep each response (and the API server's work for it) bounded.
const defaultPageSize = 500

func (c *Cluster) reservations(ctx context.Context, opts ...kubeclient.ListOption) ([]ipamv1.OverlappingRangeIPReservation, error) {
	page := c.PageSize
	if page <= 0 {
		page = defaultPageSize
	}
	var out []ipamv1.OverlappingRangeIPReservation
	cont := ""
	for {
		var list ipamv1.OverlappingRangeIPReservationList
		if err := c.Client.List(ctx, &list, append([]kubeclient.ListOption{kubeclient.Limit(page), kubeclient.Continue(cont)}, opts...)...); err != nil {
			return nil, fmt.Errorf("failed to list OverlappingRangeIPReservations: %w", err)
		}
		out = append(out, list.Items...)
		if cont = list.Continue; cont == "" {
			return out, nil
		}
	}
}

// Pools lists the IPPools with the number of reservations each holds: the controller's count
// (status.allocated, written at most a second after a change) where a pool has one and LiveCounts
// is off, so that listing the pools costs one request whatever the cluster holds; otherwise
// counted now, from one list of every reservation (LiveCounts) or of the pool's own, which the
// API server selects on spec.pool.
func (c *Cluster) Pools(ctx context.Context) ([]Pool, error) {
	var list ipamv1.IPPoolList
	if err := c.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("failed to list IPPools: %w", err)
	}
	used := map[string]int64{}
	if c.LiveCounts {
		rs, err := c.reservations(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			used[r.Spec.Pool]++
		}
	} else {
		for _, p := range list.Items {
			if p.Status.Allocated != nil {
				used[p.Name] = *p.Status.Allocated
				continue
			}
			rs, err := c.reservations(ctx, kubeclient.MatchingFields{PoolField: p.Name})
			if err != nil {
				return nil, err
			}
			used[p.Name] = int64(len(rs))
		}
	}
	out := make([]Pool, 0, len(list.Items))
	for i := range list.Items {
		obj := &list.Items[i]
		p := Pool{Name: obj.Name, Network: obj.Spec.NetworkName, Used: used[obj.Name], Created: obj.CreationTimestamp.Time, UsedFrom: UsedFromReservations}
		if !c.LiveCounts && obj.Status.Allocated != nil {
			p.UsedFrom = UsedFromStatus
		}
		if model, err := ippool.Parse(obj); err != nil {
			p.RangeErr = err.Error()
			p.Subnet, _ = netip.ParsePrefix(obj.Spec.Range)
		} else {
			p.Model, p.Subnet = model, model.Range.Subnet
			if err := ippool.Serving(obj); err != nil {
				p.NotServing = err.Error()
			} else if text := ippool.OverlapText(model, list.Items); text != "" {
				p.NotServing = text
			}
		}
		if cond := meta.FindStatusCondition(obj.Status.Conditions, ipamv1.IPPoolReadyCondition); cond != nil {
			p.Ready = string(cond.Status)
			if cond.Reason != "" && cond.Status != "True" {
				p.Ready += " (" + cond.Reason + ")"
			}
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// PodAllocations lists the pod's reservations, which the API server selects on spec.podRef.
func (c *Cluster) PodAllocations(ctx context.Context, namespace, name string) ([]Allocation, error) {
	var list ipamv1.OverlappingRangeIPReservationList
	if err := c.Client.List(ctx, &list, kubeclient.MatchingFields{PodRefField: namespace + "/" + name}); err != nil {
		return nil, fmt.Errorf("failed to list the reservations of pod %s/%s: %w", namespace, name, err)
	}
	return c.allocationsOf(list.Items, ""), nil
}

// PodRefField and PoolField are the reservations' selectable fields of their pod
// ("namespace/name") and their pool.
const (
	PodRefField = "spec.podRef"
	PoolField   = "spec.pool"
)

// Allocations lists the reservations of pool (every pool for ""); the API server selects a
// pool's on spec.pool.
func (c *Cluster) Allocations(ctx context.Context, pool string) ([]Allocation, error) {
	var opts []kubeclient.ListOption
	if pool != "" {
		opts = append(opts, kubeclient.MatchingFields{PoolField: pool})
	}
	rs, err := c.reservations(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return c.allocationsOf(rs, pool), nil
}

// allocationsOf is the allocations of the reservations rs of pool ("" for every pool), sorted.
func (c *Cluster) allocationsOf(rs []ipamv1.OverlappingRangeIPReservation, pool string) []Allocation {
	var out []Allocation
	for i := range rs {
		r := &rs[i]
		if pool != "" && r.Spec.Pool != pool {
			continue
		}
		addr, err := netip.ParseAddr(r.Spec.Address)
		if err != nil {
			continue // the API refuses such a reservation; `netpoolctl check` names any that slipped in
		}
		ns, name, _ := gcpolicy.SplitPodRef(r.Spec.PodRef)
		out = append(out, Allocation{
			Pool: r.Spec.Pool, Address: addr.Unmap(), Namespace: ns, PodName: name, PodUID: r.Spec.PodUID,
			ContainerID: r.Spec.ContainerID, Interface: r.Spec.IfName, Node: r.Spec.Node,
			Network: r.Annotations[ipamv1.NetworkAnnotation], NetworkName: r.Spec.NetworkName, Reservation: r.Name, UID: string(r.UID),
			Owner: ownerOf(r.Spec.Owner), Created: r.CreationTimestamp.Time, ref: r,
		})
	}
	sortAllocations(out)
	return out
}

func sortAllocations(as []Allocation) {
	sort.Slice(as, func(i, j int) bool {
		if as[i].Pool != as[j].Pool {
			return as[i].Pool < as[j].Pool
		}
		return as[i].Address.Less(as[j].Address)
	})
}

// Released is empty: on this version an agent keeps its pools' cool-downs in its own memory, which
// nothing in the cluster shows.
func (c *Cluster) Released(context.Context, string) ([]Released, error) { return nil, nil }

// Slices lists pool's IPPoolSlices, each with the reservations of the pool inside it.
func (c *Cluster) Slices(ctx context.Context, pool string) ([]Slice, error) {
	var list ipamv1.IPPoolSliceList
	if err := c.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("failed to list IPPoolSlices: %w", err)
	}
	as, err := c.Allocations(ctx, pool)
	if err != nil {
		return nil, err
	}
	var out []Slice
	for _, s := range list.Items {
		if s.Spec.Pool != pool {
			continue
		}
		prefix, err := netip.ParsePrefix(s.Spec.Range)
		if err != nil {
			continue // refused by the API; `netpoolctl check` names it
		}
		sl := Slice{Name: s.Name, Pool: pool, Range: prefix, Node: s.Spec.Node, Created: s.CreationTimestamp.Time}
		for _, a := range as {
			if prefix.Contains(a.Address) {
				sl.Used++
			}
		}
		out = append(out, sl)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Range.Addr().Less(out[j].Range.Addr()) })
	return out, nil
}

// Alive judges a's owner by the controller's own leak policy: alive unless gcpolicy.Judge gives
// a release reason. A reservation younger than the grace period, one without a pod, one whose pod
// runs and lists it, one whose persistent owner (an IPAMClaim, a sticky StatefulSet) exists, and
// one whose owner is gone while pods are still bound to it are alive.
func (c *Cluster) Alive(ctx context.Context, a Allocation) (bool, string, error) {
	r, ok := a.ref.(*ipamv1.OverlappingRangeIPReservation)
	if !ok || r == nil {
		return true, "the allocation was not read from a reservation, so nothing shows that its owner is gone", nil
	}
	facts, err := gcpolicy.Read(ctx, c.Client, r)
	if err != nil {
		return false, "", err
	}
	v := gcpolicy.Judge(r, facts, c.Now(), c.Grace)
	switch {
	case v.Reason != "":
		return false, v.Reason + ": " + v.Detail, nil
	case v.Recheck > 0:
		return true, fmt.Sprintf("the reservation is younger than the grace %s: an ADD may still be in progress (--grace)", c.Grace), nil
	case v.Bound != "":
		return true, v.Bound, nil
	case r.Spec.Owner != nil:
		return true, fmt.Sprintf("%s: the address belongs to it, whatever its pods do, until it is gone", facts.OwnerDetail), nil
	case r.Spec.PodRef == "" || facts.Pod == nil:
		return true, "the reservation names no pod, so nothing shows that its owner is gone", nil
	}
	why := fmt.Sprintf("pod %s exists (%s)", r.Spec.PodRef, facts.Pod.Status.Phase)
	if v.Detail != "" {
		why += ": " + v.Detail
	}
	return true, why, nil
}

// Release deletes a's reservation by the controller's conditional delete (on its UID), so a
// claim made anew under the same name is never touched.
func (c *Cluster) Release(ctx context.Context, a Allocation) (bool, error) {
	return gcpolicy.Delete(ctx, c.Client, a.ref.(*ipamv1.OverlappingRangeIPReservation))
}

func ownerOf(o *ipamv1.ReservationOwner) *Owner {
	if o == nil {
		return nil
	}
	return &Owner{Kind: string(o.Kind), Namespace: o.Namespace, Name: o.Name, Ordinal: o.Ordinal, Interface: o.Interface}
}
