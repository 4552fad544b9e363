package kubestore

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/poll"
)

// sliceRecords returns what the slice of block i of pool records as cooling, by address.
func sliceRecords(t *testing.T, env *envtest.Env, pool string, i uint64) []string {
	t.Helper()
	sl := &ipamv1.IPPoolSlice{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: ipamv1.SliceName(pool, i)}, sl); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range sl.Spec.Cooling {
		out = append(out, c.Address)
	}
	return out
}

// TestCooldownSurvivesARestart: the addresses a node released under a cool-down are written behind
// to its slice, so that its agent's next life passes over them too. Without the record, the
// restarted agent resumes its round-robin after the highest address the node holds: the one
// released last, as here.
func TestCooldownSurvivesARestart(t *testing.T) {
	env := envtest.Shared(t)
	c := conf("cool-restart", `,"network_name":"cool-restart","range":"10.145.0.0/24","reuseCooldown":"1h"`)
	const pool = "cool-restart-10.145.0.0-24"
	first, stop := startStoppable(t, env, "node-cool-restart", Options{}, nil)
	n := &node{store: first}
	for i := range 5 { // .1-.5
		n.mustAdd(t, c, fmt.Sprintf("x%d", i))
	}
	for _, id := range []string{"x3", "x4"} { // .4, .5
		if _, err := n.del(c, id); err != nil {
			t.Fatal(err)
		}
	}
	// Written behind: within a moment, with no call of the node to prompt it.
	poll.Eventually(t, 30*time.Second, "the slice records both releases", func() error {
		if got := fmt.Sprint(sliceRecords(t, env, pool, 0)); got != "[10.145.0.4 10.145.0.5]" {
			return fmt.Errorf("the slice records %s", got)
		}
		return nil
	})
	stop()

	n = &node{store: MustStart(t, env, "node-cool-restart", Options{}, nil)}
	for i := range 8 {
		if got := n.mustAdd(t, c, fmt.Sprintf("y%d", i)); got.String() == "10.145.0.4" || got.String() == "10.145.0.5" {
			t.Fatalf("ADD %d after the restart got %s, released a moment before it", i, got)
		}
	}
	// Claimed on request, an address stops cooling, on the slice too.
	if got, err := n.add(c, "IP=10.145.0.4", "z"); err != nil || got[0].String() != "10.145.0.4" {
		t.Fatalf("ADD asking for the cooling 10.145.0.4 = %v, %v", got, err)
	}
	if err := n.store.FlushCooling(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(sliceRecords(t, env, pool, 0)); got != "[10.145.0.5]" {
		t.Errorf("after 10.145.0.4 was claimed, the slice records %s, want [10.145.0.5]", got)
	}
}

// TestCooldownIsSeenByBorrowers: a node that borrows from another node's block passes over the
// addresses that node records as cooling while anything else is free, and takes the one released
// longest ago when nothing else is.
func TestCooldownIsSeenByBorrowers(t *testing.T) {
	env := envtest.Shared(t)
	ctx := context.Background()
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "cool-borrow"},
		Spec: ipamv1.IPPoolSpec{Range: "10.146.0.0/28", NetworkName: "cool-borrow", ReuseCooldown: "1h"}}
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	c := conf("net-cool-borrow", `,"pool":"cool-borrow"`)
	a := &node{store: MustStart(t, env, "node-cool-owner", Options{}, nil)}
	b := &node{store: MustStart(t, env, "node-cool-borrower", Options{}, nil)}
	for i := range 13 { // .1-.13 of the one block, .14 left
		a.mustAdd(t, c, fmt.Sprintf("a%d", i))
	}
	for _, id := range []string{"a4", "a8"} { // .5, then .9
		if _, err := a.del(c, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.store.FlushCooling(ctx); err != nil {
		t.Fatal(err)
	}
	// The borrower's cache holds only its own slices: it reads the owner's records with a live
	// list of the pool's slices when it borrows, so they need only be written.
	if got := fmt.Sprint(sliceRecords(t, env, pool.Name, 0)); got != "[10.146.0.5 10.146.0.9]" {
		t.Fatalf("the owner's slice records %s, want [10.146.0.5 10.146.0.9]", got)
	}
	for i, want := range []string{"10.146.0.14", "10.146.0.5", "10.146.0.9"} {
		if got := b.mustAdd(t, c, fmt.Sprintf("b%d", i)); got != netip.MustParseAddr(want) {
			t.Errorf("borrowing ADD %d got %s, want %s (free first, then the oldest release)", i, got, want)
		}
	}
}
