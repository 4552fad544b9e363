package kubestore

import (
	"testing"
	"time"
)

func TestOwnerAddressGivesWay(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Second)
	for _, tt := range []struct {
		name string
		a, b ownerAddress
		want bool
	}{
		{"bound never gives way", ownerAddress{name: "a", bound: true, created: t0}, ownerAddress{name: "b", bound: true, created: t1}, false},
		{"bound stays against a newer unbound", ownerAddress{name: "a", bound: true, created: t0}, ownerAddress{name: "b", created: t1}, false},
		{"unbound gives way to bound", ownerAddress{name: "a", created: t1}, ownerAddress{name: "b", bound: true, created: t0}, true},
		{"then to the newer", ownerAddress{name: "b", created: t0}, ownerAddress{name: "a", created: t1}, true},
		{"the newer stays", ownerAddress{name: "a", created: t1}, ownerAddress{name: "b", created: t0}, false},
		{"the name breaks a tie", ownerAddress{name: "a", created: t0}, ownerAddress{name: "b", created: t0}, true},
		{"itself", ownerAddress{name: "a", created: t0}, ownerAddress{name: "a", created: t0}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.givesWayTo(tt.b); got != tt.want {
				t.Fatalf("givesWayTo = %v, want %v", got, tt.want)
			}
			if tt.a.name != tt.b.name && !(tt.a.bound && tt.b.bound) && tt.a.givesWayTo(tt.b) == tt.b.givesWayTo(tt.a) {
				t.Fatalf("a and b both give way, or neither")
			}
		})
	}
}
