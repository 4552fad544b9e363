package kubestore

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/envtest"
)

// TestSmallPool fills a /28 pool from two nodes: the pool is one slice of 16 addresses, not one
// slice per address, and the ADD that finds it full names the IPPool to look at.
func TestSmallPool(t *testing.T) {
	env := envtest.Start(t)
	a := &node{store: MustStart(t, env, "node-a", Options{}, nil)}
	b := &node{store: MustStart(t, env, "node-b", Options{}, nil)}
	cs := conf("net-small", `,"range":"10.45.0.0/28"`) // 14 addresses
	const pool = "10.45.0.0-28"

	for i := range 10 {
		a.mustAdd(t, cs, fmt.Sprintf("a%d", i))
	}
	for i := range 4 {
		b.mustAdd(t, cs, fmt.Sprintf("b%d", i)) // node-b borrows: the one block is node-a's
	}
	var slices ipamv1.IPPoolSliceList
	if err := env.Client.List(context.Background(), &slices, client.MatchingFields{"spec.pool": pool}); err != nil {
		t.Fatal(err)
	}
	if len(slices.Items) != 1 || slices.Items[0].Spec.Range != "10.45.0.0/28" || slices.Items[0].Spec.Node != "node-a" {
		var got []string
		for _, sl := range slices.Items {
			got = append(got, sl.Spec.Range+"@"+sl.Spec.Node)
		}
		t.Fatalf("slices of %s = %v, want the one block 10.45.0.0/28 of node-a", pool, got)
	}

	want := "pool exhausted: no free address in IPPool " + pool + " (window 10.45.0.1-10.45.0.14, capacity 14): " +
		"every address is reserved; see kubectl describe ippools.ipam.netpool.io " + pool
	for _, n := range []*node{a, b} {
		_, err := n.add(cs, "", "one-too-many")
		if !errors.Is(err, allocator.ErrPoolExhausted) || err.Error() != want {
			t.Errorf("ADD on %s of the full pool = %v, want %q", n.store.Node(), err, want)
		}
	}
}
