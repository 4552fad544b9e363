package egressrouter

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/poll"
)

// TestEgressRouterPassesOverCoolingAddresses: a router allocated from a pool with a reuse
// cool-down does not get the lowest free address while a node's slice records it as cooling; an
// entry older than the cool-down holds nothing back.
func TestEgressRouterPassesOverCoolingAddresses(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	startEgressManager(t, f)
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: f.NS + "-cool"},
		Spec: ipamv1.IPPoolSpec{Range: "192.168.52.0/29", Gateway: "192.168.52.1", NetworkName: "ext-cool", ReuseCooldown: "1h"}}
	f.Create(pool)
	f.Node("node-a")
	now := time.Now()
	f.Create(&ipamv1.IPPoolSlice{
		ObjectMeta: metav1.ObjectMeta{Name: ipamv1.SliceName(pool.Name, 0), Labels: map[string]string{
			ipamv1.NodeLabel: "node-a", ipamv1.PoolLabel: ipamv1.LabelValue(pool.Name)}},
		Spec: ipamv1.IPPoolSliceSpec{Pool: pool.Name, Range: "192.168.52.0/29", Node: "node-a", Cooling: []ipamv1.CoolingAddress{
			{Address: "192.168.52.2", ReleasedAt: metav1.NewTime(now.Add(-time.Minute))},
			{Address: "192.168.52.3", ReleasedAt: metav1.NewTime(now.Add(-2 * time.Hour))}, // cooled
		}},
	})
	r := f.TestRouter("cool")
	r.Spec.Addresses, r.Spec.Pool = nil, pool.Name
	r.Spec.Redirect.RedirectRules = r.Spec.Redirect.RedirectRules[1:]
	f.Create(r)
	poll.Eventually(t, ctrltest.EgressTimeout, "allocated address in status", func() error {
		if got := f.GetRouter("cool").Status.Addresses; len(got) != 1 {
			return fmt.Errorf("status addresses %+v", got)
		}
		return nil
	})
	if got := f.GetRouter("cool").Status.Addresses[0].IP; got != "192.168.52.3/29" {
		t.Errorf("allocated %s, want 192.168.52.3/29: .2 cools, .3 cooled an hour ago", got)
	}
}
