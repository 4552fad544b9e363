package v1alpha1

import "testing"

func TestDropUsers(t *testing.T) {
	src := ReservationUser{ContainerID: "src", IfName: "net1", PodRef: "vms/launcher-1", PodUID: "u1", Node: "node-a"}
	dst := ReservationUser{ContainerID: "dst", IfName: "net1", PodRef: "vms/launcher-2", PodUID: "u2", Node: "node-b"}
	r := func() *OverlappingRangeIPReservation {
		res := &OverlappingRangeIPReservation{}
		res.Spec.Users = []ReservationUser{src, dst}
		res.Spec.ContainerID, res.Spec.IfName, res.Spec.PodRef, res.Spec.PodUID = src.ContainerID, src.IfName, src.PodRef, src.PodUID
		return res
	}
	is := func(id string) func(ReservationUser) bool {
		return func(u ReservationUser) bool { return u.ContainerID == id }
	}

	if got := r(); got.DropUsers(is("other")) || len(got.Spec.Users) != 2 {
		t.Fatalf("dropping nobody changed %+v", got.Spec)
	}
	got := r()
	if !got.DropUsers(is("src")) || len(got.Spec.Users) != 1 || got.Spec.ContainerID != "dst" || got.Spec.PodRef != dst.PodRef || got.Spec.PodUID != dst.PodUID {
		t.Fatalf("after the holder left: %+v, want dst alone, holding it", got.Spec)
	}
	got = r()
	if !got.DropUsers(is("dst")) || got.Spec.ContainerID != "src" || len(got.Spec.Users) != 1 {
		t.Fatalf("after another user left: %+v, want src still holding it", got.Spec)
	}
	got = r()
	if !got.DropUsers(func(ReservationUser) bool { return true }) || got.Spec.Users != nil || got.Spec.ContainerID != "src" {
		t.Fatalf("after every user left: %+v, want no users and the last holder kept", got.Spec)
	}
}
