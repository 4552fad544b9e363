package cli

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/allocator/boltstore"
	"github.com/netpool/netpool/cli/inventory"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

func findAllocation(t *testing.T, as []inventory.Allocation, addr string) inventory.Allocation {
	t.Helper()
	for _, a := range as {
		if a.Address == netip.MustParseAddr(addr) {
			return a
		}
	}
	t.Fatalf("%s is not among the allocations %v", addr, as)
	return inventory.Allocation{}
}

// TestClusterReleaseSparesAClaimMadeAnew: between the read and the release the address is
// released and claimed again under the same reservation name; the release leaves the new claim.
func TestClusterReleaseSparesAClaimMadeAnew(t *testing.T) {
	f := newClusterFixture(t)
	ctx := context.Background()
	// One reservation per List request: the pages are followed to the end.
	src := &inventory.Cluster{Client: newREST(t, f.env.Config), Now: viewClock, Grace: time.Minute, PageSize: 1}
	as, err := src.Allocations(ctx, ctlPoolA)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 2 {
		t.Fatalf("Allocations of %s = %v, want its 2", ctlPoolA, as)
	}
	stale := findAllocation(t, as, "10.78.0.5")
	key := client.ObjectKey{Name: ipamv1.ReservationName(ctlNetwork, netip.MustParseAddr("10.78.0.5"))}
	var r ipamv1.OverlappingRangeIPReservation
	if err := f.c.Get(ctx, key, &r); err != nil {
		t.Fatal(err)
	}
	old := r.UID
	if err := f.c.Delete(ctx, &r); err != nil {
		t.Fatal(err)
	}
	r.ResourceVersion, r.UID = "", ""
	if err := f.c.Create(ctx, &r); err != nil {
		t.Fatal(err)
	}
	released, err := src.Release(ctx, stale)
	if err != nil || released {
		t.Fatalf("Release of the stale claim = %v, %v; want false, nil", released, err)
	}
	if err := f.c.Get(ctx, key, &r); err != nil || r.UID == old {
		t.Fatalf("the new claim is gone or is the old one: %v", err)
	}
}

// TestBoltReleaseSparesAClaimMadeAnew: the same for the embedded store, where a DEL and an ADD
// of the same attachment for the same address came between.
func TestBoltReleaseSparesAClaimMadeAnew(t *testing.T) {
	db := boltFixture(t)
	ctx := context.Background()
	s, err := boltstore.OpenExisting(db, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	src := &inventory.Bolt{Store: s}
	as, err := src.Allocations(ctx, "192.168.77.0/29")
	if err != nil {
		t.Fatal(err)
	}
	stale := findAllocation(t, as, "192.168.77.4")
	c, err := ipam.Load([]byte(`{"cniVersion":"1.1.0","name":"macvlan1","ipam":{"type":"netpool","range":"192.168.77.0/29","range_start":"192.168.77.4"}}`), "IP=192.168.77.4", nil)
	if err != nil {
		t.Fatal(err)
	}
	a := allocator.New(s)
	o := allocator.Owner{ContainerID: "host-ctr", IfName: "eth1"}
	if _, err := a.Del(ctx, c, o); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Add(ctx, c, o); err != nil || got[0].Addr != stale.Address {
		t.Fatalf("re-Add = %v, %v", got, err)
	}
	released, err := src.Release(ctx, stale)
	if err != nil || released {
		t.Fatalf("Release of the stale claim = %v, %v; want false, nil", released, err)
	}
	if as, err := src.Allocations(ctx, "192.168.77.0/29"); err != nil || len(as) != 1 || as[0].Created.Equal(stale.Created) {
		t.Fatalf("after: %v, %v; want the new claim alone", as, err)
	}
	// The current claim itself releases.
	as, _ = src.Allocations(ctx, "192.168.77.0/29")
	if released, err := src.Release(ctx, as[0]); err != nil || !released {
		t.Fatalf("Release of the current claim = %v, %v", released, err)
	}
}
