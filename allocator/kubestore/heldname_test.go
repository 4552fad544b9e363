package kubestore

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/poll"
)

// TestHeldUnderAnotherName gives the node a reservation of an address of its pool under the name
// another scope would use (a NAD of the same pool with enable_overlapping_ranges on names it
// after the network, this one after the pool). The name is then no lock for this config, but the
// address is still held: the store must neither hand it out nor grant it on request.
func TestHeldUnderAnotherName(t *testing.T) {
	env := envtest.Start(t)
	a := &node{store: MustStart(t, env, "node-a", Options{}, nil)}
	c := conf("held", `,"range":"10.48.0.0/29","network_name":"blue","enable_overlapping_ranges":false`)
	first := a.mustAdd(t, c, "first")
	pool := "blue-10.48.0.0-29"
	held := first.Next()
	r := &ipamv1.OverlappingRangeIPReservation{
		ObjectMeta: metav1.ObjectMeta{
			Name:   ipamv1.ReservationName("blue", held),
			Labels: map[string]string{ipamv1.NodeLabel: "node-a", ipamv1.PoolLabel: pool},
		},
		Spec: ipamv1.OverlappingRangeIPReservationSpec{Address: held.String(), Pool: pool, ContainerID: "other",
			IfName: "net1", Node: "node-a", NetworkName: "blue"},
	}
	if r.Name == ipamv1.ReservationName(pool, held) {
		t.Fatalf("the two scopes name %s alike; the test proves nothing", held)
	}
	if err := env.Client.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 10*time.Second, "the node's index sees reservation "+r.Name, func() error {
		if !a.store.index.heldIn(held, pool, false, "") {
			return fmt.Errorf("%s is not held in the index", held)
		}
		return nil
	})

	got := map[netip.Addr]bool{first: true}
	for _, id := range []string{"second", "third"} {
		addr := a.mustAdd(t, c, id)
		if addr == held {
			t.Fatalf("%s got %s, which reservation %s holds", id, addr, r.Name)
		}
		got[addr] = true
	}
	_, err := a.add(c, "IP="+held.String(), "asks")
	if !errors.Is(err, allocator.ErrAddressInUse) {
		t.Errorf("requesting %s = %v, want ErrAddressInUse", held, err)
	}
}
