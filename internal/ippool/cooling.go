package ippool

import (
	"net/netip"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// Cooling is an address of a pool released less than the pool's reuse cool-down ago, as a node
// records it on its IPPoolSlice (spec.cooling). Every allocator that claims in a pool passes over
// its cooling addresses while anything else is free, and takes the one released longest ago when
// nothing else is (allocator/cooldown.go states the rule).
type Cooling struct {
	Addr       netip.Addr
	ReleasedAt time.Time
}

// CoolingIn returns the addresses that slices record as cooling at now under cooldown, released
// longest ago first. An entry that does not parse or lies outside its slice's block is left out
// (the CRD refuses both; a stale object may not), and so is one released at or before
// now-cooldown; an address recorded twice counts from its latest release. With no cool-down
// nothing cools, whatever the slices record.
func CoolingIn(slices []ipamv1.IPPoolSlice, cooldown time.Duration, now time.Time) []Cooling {
	if cooldown <= 0 {
		return nil
	}
	cutoff := now.Add(-cooldown)
	latest := map[netip.Addr]time.Time{}
	for i := range slices {
		block, err := netip.ParsePrefix(slices[i].Spec.Range)
		if err != nil {
			continue
		}
		for _, c := range slices[i].Spec.Cooling {
			a, err := netip.ParseAddr(c.Address)
			if a = a.Unmap(); err != nil || !block.Contains(a) || !c.ReleasedAt.Time.After(cutoff) {
				continue
			}
			if t, ok := latest[a]; !ok || c.ReleasedAt.Time.After(t) {
				latest[a] = c.ReleasedAt.Time
			}
		}
	}
	out := make([]Cooling, 0, len(latest))
	for a, t := range latest {
		out = append(out, Cooling{Addr: a, ReleasedAt: t})
	}
	SortCooling(out)
	return out
}

// SortCooling orders cs released longest ago first, by address among equal times.
func SortCooling(cs []Cooling) {
	slices.SortFunc(cs, func(x, y Cooling) int {
		if c := x.ReleasedAt.Compare(y.ReleasedAt); c != 0 {
			return c
		}
		return x.Addr.Compare(y.Addr)
	})
}

// SliceCooling is the spec.cooling a node writes for cs, the cooling addresses of one of its
// blocks: at most ipamv1.MaxSliceCooling, the releases most recent, in address order. Release
// times are rounded up to the second the API's timestamps keep, so that a cool-down read back
// never ends early.
func SliceCooling(cs []Cooling) []ipamv1.CoolingAddress {
	if len(cs) == 0 {
		return nil
	}
	cs = slices.Clone(cs)
	SortCooling(cs)
	cs = cs[max(0, len(cs)-ipamv1.MaxSliceCooling):]
	slices.SortFunc(cs, func(x, y Cooling) int { return x.Addr.Compare(y.Addr) })
	out := make([]ipamv1.CoolingAddress, len(cs))
	for i, c := range cs {
		at := c.ReleasedAt.UTC()
		if r := at.Truncate(time.Second); !r.Equal(at) {
			at = r.Add(time.Second)
		}
		out[i] = ipamv1.CoolingAddress{Address: c.Addr.String(), ReleasedAt: metav1.NewTime(at)}
	}
	return out
}
