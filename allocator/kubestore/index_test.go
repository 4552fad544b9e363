package kubestore

import (
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

func res(name, uid, addr, cid string) *ipamv1.OverlappingRangeIPReservation {
	return &ipamv1.OverlappingRangeIPReservation{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid), Annotations: map[string]string{ipamv1.NetworkAnnotation: "net1"}},
		Spec: ipamv1.OverlappingRangeIPReservationSpec{Address: addr, Pool: "p", ContainerID: cid, IfName: "eth0",
			PodRef: "ns/pod", PodUID: "u", Node: "n"},
	}
}

func TestIndexEvents(t *testing.T) {
	x := newIndex()
	h := x.handler()
	o := allocator.Owner{ContainerID: "c1", IfName: "eth0"}
	h.OnAdd(res("10.0.0.1", "u1", "10.0.0.1", "c1"), true)
	got := x.owned("p", o)
	if len(got) != 1 || got[0].addr != netip.MustParseAddr("10.0.0.1") || got[0].network != "net1" || got[0].pod.Name != "pod" {
		t.Fatalf("owned = %+v", got)
	}
	if !x.holds(netip.MustParseAddr("10.0.0.1"), "10.0.0.1") || x.holds(netip.MustParseAddr("10.0.0.1"), "blue.10.0.0.1") {
		t.Error("holds is wrong")
	}

	// The store deletes it; a late update event for the deleted object must not bring it back.
	x.remove("10.0.0.1", "u1", true)
	h.OnUpdate(nil, res("10.0.0.1", "u1", "10.0.0.1", "c1"))
	if len(x.owned("p", o)) != 0 {
		t.Error("a late event brought back a deleted reservation")
	}
	// The name is claimed again by another object: that one is tracked.
	h.OnAdd(res("10.0.0.1", "u2", "10.0.0.1", "c2"), false)
	if e, ok := x.lookup("10.0.0.1"); !ok || e.uid != "u2" {
		t.Errorf("lookup = %+v, %v", e, ok)
	}
	// The delete of the old object (even as a final state unknown) leaves the new one alone.
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "10.0.0.1", Obj: res("10.0.0.1", "u1", "10.0.0.1", "c1")})
	if _, ok := x.lookup("10.0.0.1"); !ok {
		t.Error("the delete of the old object removed the new one")
	}
	if len(x.deleted) != 0 {
		t.Errorf("tombstones left after the informer confirmed: %v", x.deleted)
	}
	h.OnDelete(res("10.0.0.1", "u2", "10.0.0.1", "c2"))
	if _, ok := x.lookup("10.0.0.1"); ok || len(x.byAddr) != 0 || len(x.byOwner) != 0 {
		t.Errorf("index not empty: %v %v %v", x.byName, x.byAddr, x.byOwner)
	}

	// Objects the index cannot use are ignored.
	h.OnAdd(res("bad", "u3", "not-an-ip", "c3"), false)
	h.OnAdd("not a reservation", false)
	h.OnDelete("not a reservation")
	if len(x.byName) != 0 {
		t.Errorf("index = %v", x.byName)
	}
}

func TestIndexTombstonesExpire(t *testing.T) {
	x := newIndex()
	now := time.Now()
	x.now = func() time.Time { return now }
	x.remove("a", "u1", true)
	now = now.Add(tombstoneTTL + time.Second)
	x.remove("b", "u2", true)
	if _, ok := x.deleted["u1"]; ok || len(x.deleted) != 1 {
		t.Errorf("tombstones = %v, want only u2", x.deleted)
	}
}

func TestIndexQueries(t *testing.T) {
	x := newIndex()
	for _, r := range []*ipamv1.OverlappingRangeIPReservation{
		res("10.0.0.9", "1", "10.0.0.9", "c1"), res("10.0.0.2", "2", "10.0.0.2", "c1"), res("10.0.1.5", "3", "10.0.1.5", "c2"),
	} {
		x.put(r)
	}
	other := res("10.0.0.3", "4", "10.0.0.3", "c3")
	other.Spec.Pool = "q"
	x.put(other)
	if got := x.owned("p", allocator.Owner{ContainerID: "c1", IfName: "eth0"}); len(got) != 2 || got[0].addr.String() != "10.0.0.2" {
		t.Errorf("owned = %+v, want two, lowest first", got)
	}
	if got := x.inPool("p"); len(got) != 3 || got[2].addr.String() != "10.0.1.5" {
		t.Errorf("inPool = %+v", got)
	}
	// A small block is counted address by address, a large one over the entries: same answers.
	for block, want := range map[string]int{"10.0.0.0/24": 2, "10.0.0.8/29": 1, "10.0.0.0/16": 3, "10.0.0.0/8": 3, "10.0.2.0/24": 0} {
		if n := x.countIn("p", netip.MustParsePrefix(block)); n != want {
			t.Errorf("countIn(%s) = %d, want %d (10.0.0.3 is another pool's)", block, n, want)
		}
	}
}
