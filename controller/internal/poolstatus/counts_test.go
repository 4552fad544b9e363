package poolstatus

import (
	"testing"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/ippool"
)

// TestStatusCountsAreTheReconcilersCounts: the pool model's counts (which netpoolctl check
// compares with) are what a reconcile writes.
func TestStatusCountsAreTheReconcilersCounts(t *testing.T) {
	tests := []struct {
		name           string
		spec           ipamv1.IPPoolSpec
		allocated      int64
		capacity, free string
	}{
		{"a /29 with a gateway", ipamv1.IPPoolSpec{Range: "10.0.0.0/29", Gateway: "10.0.0.1"}, 2, "5", "3"},
		{"over-committed frees nothing", ipamv1.IPPoolSpec{Range: "10.0.0.0/30"}, 5, "2", "0"},
		{"IPv6 beyond int64", ipamv1.IPPoolSpec{Range: "fd00::/64"}, 1, "18446744073709551615", "18446744073709551614"},
		{"unparsable", ipamv1.IPPoolSpec{Range: "10.0.0.0/33"}, 1, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &ipamv1.IPPool{Spec: tt.spec}
			capacity, allocated, free := ippool.CountsOf(p, tt.allocated).Status()
			if capacity != tt.capacity || allocated != tt.allocated || free != tt.free {
				t.Fatalf("counts %s, %d, %s; want %s, %d, %s", capacity, allocated, free, tt.capacity, tt.allocated, tt.free)
			}
			written := p.DeepCopy()
			applyVerdict(written, judgePool(p, nil, tt.allocated))
			if written.Status.Capacity != capacity || *written.Status.Allocated != allocated || written.Status.Free != free {
				t.Fatalf("a reconcile writes %+v; the pool model says %s, %d, %s", written.Status, capacity, allocated, free)
			}
		})
	}
}
