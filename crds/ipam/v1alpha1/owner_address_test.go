package v1alpha1

import (
	"testing"
	"time"
)

func TestOwnerAddressGivesWay(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Second)
	for _, tt := range []struct {
		name string
		a, b OwnerAddress
		want bool
	}{
		{"bound never gives way", OwnerAddress{Name: "a", Bound: true, Created: t0}, OwnerAddress{Name: "b", Bound: true, Listed: true, Created: t1}, false},
		{"unbound gives way to bound", OwnerAddress{Name: "a", Listed: true, Created: t1}, OwnerAddress{Name: "b", Bound: true, Created: t0}, true},
		{"then to the listed one", OwnerAddress{Name: "a", Created: t1}, OwnerAddress{Name: "b", Listed: true, Created: t0}, true},
		{"the listed one stays", OwnerAddress{Name: "a", Listed: true, Created: t0}, OwnerAddress{Name: "b", Created: t1}, false},
		{"then to the newer", OwnerAddress{Name: "b", Created: t0}, OwnerAddress{Name: "a", Created: t1}, true},
		{"the newer stays", OwnerAddress{Name: "a", Created: t1}, OwnerAddress{Name: "b", Created: t0}, false},
		{"the name breaks a tie", OwnerAddress{Name: "a", Created: t0}, OwnerAddress{Name: "b", Created: t0}, true},
		{"itself", OwnerAddress{Name: "a", Created: t0}, OwnerAddress{Name: "a", Created: t0}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.GivesWayTo(tt.b); got != tt.want {
				t.Fatalf("GivesWayTo = %v, want %v", got, tt.want)
			}
			// Of two distinct addresses, one gives way unless both are bound.
			if tt.a.Name != tt.b.Name && !(tt.a.Bound && tt.b.Bound) && tt.a.GivesWayTo(tt.b) == tt.b.GivesWayTo(tt.a) {
				t.Fatalf("a and b both give way, or neither: %v", tt.a.GivesWayTo(tt.b))
			}
		})
	}
}
