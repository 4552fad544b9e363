// Package predicates holds the event filters that more than one reconciler uses.
package predicates

import (
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// CreatedOnly passes only the events of objects appearing (the initial list included): the GC
// judges a reservation when it appears, and later on its pod's events, its recheck and sweeps; the
// node reclaim learns of the nodes that reservations and slices name.
func CreatedOnly() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return true },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// DeletedOnly passes delete events only: what a pool holds matters to its removal when it goes,
// and an owner's deletion ends its addresses.
func DeletedOnly() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
