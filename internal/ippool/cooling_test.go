package ippool

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

func TestCoolingIn(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) metav1.Time { return metav1.NewTime(now.Add(-ago)) }
	slice := func(rng string, cs ...ipamv1.CoolingAddress) ipamv1.IPPoolSlice {
		return ipamv1.IPPoolSlice{Spec: ipamv1.IPPoolSliceSpec{Range: rng, Cooling: cs}}
	}
	slices := []ipamv1.IPPoolSlice{
		slice("10.0.0.0/28",
			ipamv1.CoolingAddress{Address: "10.0.0.3", ReleasedAt: at(10 * time.Minute)},
			ipamv1.CoolingAddress{Address: "10.0.0.4", ReleasedAt: at(2 * time.Hour)},     // cooled
			ipamv1.CoolingAddress{Address: "10.0.0.99", ReleasedAt: at(time.Minute)},      // outside the block
			ipamv1.CoolingAddress{Address: "not-an-address", ReleasedAt: at(time.Minute)}, // does not parse
			ipamv1.CoolingAddress{Address: "10.0.0.5", ReleasedAt: at(time.Hour)},         // cooled exactly now
			ipamv1.CoolingAddress{Address: "::ffff:10.0.0.6", ReleasedAt: at(30 * time.Minute)}),
		slice("10.0.0.16/28",
			ipamv1.CoolingAddress{Address: "10.0.0.17", ReleasedAt: at(50 * time.Minute)},
			ipamv1.CoolingAddress{Address: "10.0.0.17", ReleasedAt: at(5 * time.Minute)}), // released again
		slice("garbage", ipamv1.CoolingAddress{Address: "10.0.0.1", ReleasedAt: at(time.Minute)}),
	}
	got := CoolingIn(slices, time.Hour, now)
	want := []Cooling{
		{netip.MustParseAddr("10.0.0.6"), now.Add(-30 * time.Minute)},
		{netip.MustParseAddr("10.0.0.3"), now.Add(-10 * time.Minute)},
		{netip.MustParseAddr("10.0.0.17"), now.Add(-5 * time.Minute)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CoolingIn = %v, want %v", got, want)
	}
	if got := CoolingIn(slices, 0, now); len(got) != 0 {
		t.Errorf("CoolingIn without a cool-down = %v, want nothing", got)
	}
}

func TestSliceCooling(t *testing.T) {
	base := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if got := SliceCooling(nil); got != nil {
		t.Errorf("SliceCooling(nil) = %v, want nil (the field removed)", got)
	}
	got := SliceCooling([]Cooling{
		{netip.MustParseAddr("10.0.0.9"), base.Add(1500 * time.Millisecond)},
		{netip.MustParseAddr("10.0.0.2"), base.Add(3 * time.Second)},
	})
	want := []ipamv1.CoolingAddress{
		{Address: "10.0.0.2", ReleasedAt: metav1.NewTime(base.Add(3 * time.Second))},
		{Address: "10.0.0.9", ReleasedAt: metav1.NewTime(base.Add(2 * time.Second))}, // rounded up, never early
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SliceCooling = %v, want %v", got, want)
	}
	// More than a slice holds: the releases most recent are kept.
	var many []Cooling
	for i := range ipamv1.MaxSliceCooling + 10 {
		many = append(many, Cooling{netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), base.Add(time.Duration(i) * time.Second)})
	}
	kept := SliceCooling(many)
	if len(kept) != ipamv1.MaxSliceCooling || kept[0].Address != "10.1.0.10" {
		t.Errorf("SliceCooling of %d = %d entries from %s, want %d from 10.1.0.10", len(many), len(kept), kept[0].Address, ipamv1.MaxSliceCooling)
	}
}
