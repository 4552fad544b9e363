package poolstatus

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

func TestJudgePool(t *testing.T) {
	pool := func(name, network string, spec ipamv1.IPPoolSpec) ipamv1.IPPool {
		spec.NetworkName = network
		return ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	}
	deleting := pool("deleting", "blue", ipamv1.IPPoolSpec{Range: "10.0.0.0/24"})
	deleting.DeletionTimestamp = &metav1.Time{}
	tests := []struct {
		name         string
		pool         ipamv1.IPPool
		peers        []ipamv1.IPPool
		allocated    int64
		wantCapacity string
		wantInvalid  string
	}{
		{name: "a /24", pool: pool("p", "", ipamv1.IPPoolSpec{Range: "10.0.0.0/24"}), allocated: 3, wantCapacity: "254"},
		{name: "window, exclusions and gateway", wantCapacity: "84",
			pool: pool("p", "", ipamv1.IPPoolSpec{Range: "10.0.0.0/24", RangeStart: "10.0.0.10", RangeEnd: "10.0.0.109",
				Exclude: []string{"10.0.0.16/28", "10.0.0.200"}, Gateway: "10.0.0.20"})},
		{name: "IPv6 /64", pool: pool("p", "", ipamv1.IPPoolSpec{Range: "fd00::/64"}), wantCapacity: "18446744073709551615"},
		{name: "a bad gateway", pool: pool("p", "", ipamv1.IPPoolSpec{Range: "10.0.0.0/24", Gateway: "gw"}),
			wantInvalid: `spec.gateway "gw": not an IP address`},
		{name: "a bad range", pool: pool("p", "", ipamv1.IPPoolSpec{Range: "10.0.0.0/33"}),
			wantInvalid: `spec.range "10.0.0.0/33": not a CIDR (want e.g. 10.0.0.0/24 or fd00::/64)`},
		{name: "rangeStart after rangeEnd (camelCase field)", pool: pool("p", "", ipamv1.IPPoolSpec{Range: "10.0.0.0/24", RangeStart: "10.0.0.9", RangeEnd: "10.0.0.5"}),
			wantInvalid: `spec.rangeStart "10.0.0.9": is after range_end 10.0.0.5`},
		{name: "a rangeEnd outside the range", pool: pool("p", "", ipamv1.IPPoolSpec{Range: "10.0.0.0/24", RangeEnd: "10.0.1.5"}),
			wantInvalid: `spec.rangeEnd "10.0.1.5"`},
		{name: "everything excluded", pool: pool("p", "", ipamv1.IPPoolSpec{Range: "10.0.0.0/30", Exclude: []string{"10.0.0.0/30"}}),
			wantCapacity: "0", wantInvalid: "no usable address: the window 10.0.0.1-10.0.0.2 of range 10.0.0.0/30 is entirely excluded"},
		{name: "overlap within one network", pool: pool("wide", "blue", ipamv1.IPPoolSpec{Range: "10.0.0.0/24"}),
			peers: []ipamv1.IPPool{
				pool("wide", "blue", ipamv1.IPPoolSpec{Range: "10.0.0.0/24"}),
				pool("narrow", "blue", ipamv1.IPPoolSpec{Range: "10.0.0.128/25"}),
				pool("another", "blue", ipamv1.IPPoolSpec{Range: "10.0.0.0/28"}),
				pool("apart", "blue", ipamv1.IPPoolSpec{Range: "10.0.1.0/24"}),
			},
			wantCapacity: "254",
			wantInvalid:  `spec.range "10.0.0.0/24": the window 10.0.0.1-10.0.0.254 overlaps IPPool another (10.0.0.1-10.0.0.14), narrow (10.0.0.129-10.0.0.254) of network "blue"`},
		{name: "overlap in the unnamed network", pool: pool("a", "", ipamv1.IPPoolSpec{Range: "10.0.0.0/24"}),
			peers: []ipamv1.IPPool{pool("b", "", ipamv1.IPPoolSpec{Range: "10.0.0.0/16"})}, wantCapacity: "254",
			wantInvalid: `spec.range "10.0.0.0/24": the window 10.0.0.1-10.0.0.254 overlaps IPPool b (10.0.0.1-10.0.255.254) of the unnamed network`},
		{name: "disjoint windows of one subnet do not overlap", wantCapacity: "10",
			pool:  pool("low", "blue", ipamv1.IPPoolSpec{Range: "10.0.0.0/24", RangeEnd: "10.0.0.10"}),
			peers: []ipamv1.IPPool{pool("high", "blue", ipamv1.IPPoolSpec{Range: "10.0.0.0/23", RangeStart: "10.0.0.11"})}},
		{name: "a derived pool yields to an operator's pool, which stays valid", wantCapacity: "14",
			pool:        derivedPoolOf(pool("corp-10.95.0.0-28", "corp", ipamv1.IPPoolSpec{Range: "10.95.0.0/28"})),
			peers:       []ipamv1.IPPool{pool("tenant-b-pool", "corp", ipamv1.IPPoolSpec{Range: "10.95.0.0/28"})},
			wantInvalid: `spec.range "10.95.0.0/28": the window 10.95.0.1-10.95.0.14 overlaps IPPool tenant-b-pool (10.95.0.1-10.95.0.14, an operator's pool) of network "corp"`},
		{name: "an operator's pool is not made invalid by a derived one", wantCapacity: "14",
			pool:  pool("tenant-b-pool", "corp", ipamv1.IPPoolSpec{Range: "10.95.0.0/28"}),
			peers: []ipamv1.IPPool{derivedPoolOf(pool("corp-10.95.0.0-28", "corp", ipamv1.IPPoolSpec{Range: "10.95.0.0/28"}))}},
		{name: "another network, another family, an invalid or a deleted peer: no overlap", wantCapacity: "254",
			pool: pool("p", "blue", ipamv1.IPPoolSpec{Range: "10.0.0.0/24"}),
			peers: []ipamv1.IPPool{
				pool("red", "red", ipamv1.IPPoolSpec{Range: "10.0.0.0/24"}),
				pool("v6", "blue", ipamv1.IPPoolSpec{Range: "fd00::/120"}),
				pool("broken", "blue", ipamv1.IPPoolSpec{Range: "10.0.0.0/24", Gateway: "gw"}),
				deleting,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := judgePool(&tt.pool, tt.peers, tt.allocated)
			if v.allocated != tt.allocated {
				t.Errorf("allocated %d, want %d", v.allocated, tt.allocated)
			}
			capacity := ""
			if v.capacity != nil {
				capacity = v.capacity.String()
			}
			if capacity != tt.wantCapacity {
				t.Errorf("capacity %q, want %q", capacity, tt.wantCapacity)
			}
			if v.invalid != tt.wantInvalid && !(tt.wantInvalid != "" && len(v.invalid) > len(tt.wantInvalid) && v.invalid[:len(tt.wantInvalid)] == tt.wantInvalid) {
				t.Errorf("invalid %q, want %q", v.invalid, tt.wantInvalid)
			}
		})
	}
}

func derivedPoolOf(p ipamv1.IPPool) ipamv1.IPPool {
	p.Labels = map[string]string{ipamv1.DerivedLabel: ipamv1.DerivedLabelValue}
	return p
}
