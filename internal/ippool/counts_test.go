package ippool

import (
	"testing"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

func TestCounts(t *testing.T) {
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
			capacity, allocated, free := CountsOf(&ipamv1.IPPool{Spec: tt.spec}, tt.allocated).Status()
			if capacity != tt.capacity || allocated != tt.allocated || free != tt.free {
				t.Fatalf("counts %s, %d, %s; want %s, %d, %s", capacity, allocated, free, tt.capacity, tt.allocated, tt.free)
			}
		})
	}
}
