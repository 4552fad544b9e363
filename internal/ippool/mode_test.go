package ippool

import (
	"testing"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

func TestResolveOverlapping(t *testing.T) {
	enabled := poolOf("ovn-10.97.0.0-29", "ovn", "10.97.0.0/29", true)
	disabled := enabled
	disabled.Spec.OverlappingRanges = ipamv1.OverlappingRangesDisabled
	tests := []struct {
		name    string
		pool    ipamv1.IPPool
		config  ipam.Config
		want    bool
		wantErr string
	}{
		{name: "inline default on an Enabled pool", pool: enabled, config: ipam.Config{EnableOverlappingRanges: true}, want: true},
		{name: "inline false on a Disabled pool", pool: disabled, config: ipam.Config{OverlappingRangesSet: true}, want: false},
		{name: "inline false on an Enabled pool", pool: enabled, config: ipam.Config{OverlappingRangesSet: true},
			wantErr: "enable_overlapping_ranges false disagrees with IPPool ovn-10.97.0.0-29, which records overlappingRanges Enabled (enable_overlapping_ranges true): every config of one pool must agree, or one address could be handed out twice"},
		{name: "inline default on a Disabled pool", pool: disabled, config: ipam.Config{EnableOverlappingRanges: true},
			wantErr: "enable_overlapping_ranges true (the default) disagrees with IPPool ovn-10.97.0.0-29, which records overlappingRanges Disabled (enable_overlapping_ranges false)"},
		{name: "a reference without the setting follows the pool", pool: disabled, config: ipam.Config{Pool: "p", EnableOverlappingRanges: true}, want: false},
		{name: "a reference that sets it must agree", pool: disabled, config: ipam.Config{Pool: "p", EnableOverlappingRanges: true, OverlappingRangesSet: true},
			wantErr: "enable_overlapping_ranges true disagrees with IPPool ovn-10.97.0.0-29"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveOverlapping(&tt.pool, &tt.config)
			if tt.wantErr != "" {
				if err == nil || len(err.Error()) < len(tt.wantErr) || err.Error()[:len(tt.wantErr)] != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ResolveOverlapping = %t, %v, want %t", got, err, tt.want)
			}
		})
	}
	if ReservationScope("pool", "net", true) != "net" || ReservationScope("pool", "net", false) != "pool" {
		t.Fatal("ReservationScope: the network scopes overlapping pools, the pool scopes the others")
	}
}
