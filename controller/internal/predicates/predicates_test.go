package predicates

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/event"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

func TestCreatedOnly(t *testing.T) {
	p, r := CreatedOnly(), &ipamv1.OverlappingRangeIPReservation{}
	if !p.Create(event.CreateEvent{Object: r}) || !p.Create(event.CreateEvent{Object: r, IsInInitialList: true}) {
		t.Error("creates must pass, the initial list's too")
	}
	if p.Update(event.UpdateEvent{ObjectOld: r, ObjectNew: r}) || p.Delete(event.DeleteEvent{Object: r}) || p.Generic(event.GenericEvent{Object: r}) {
		t.Error("only creates may pass")
	}
}
