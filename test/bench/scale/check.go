package main

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/bench/fanout"
)

// verdict is the final LIST against the ledger.
type verdict struct {
	reservations int
	slices       int      // of the pool
	duplicates   []string // addresses held twice, or given to two live attachments
	lost         []string // live attachments without their reservation
	extra        []string // reservations of no live attachment
	unsure       int      // reservations of attachments whose DEL never succeeded
}

// verify lists every reservation of the pool (paged) and compares it with what the runtime holds:
// no address twice, none lost, none left over.
func verify(ctx context.Context, c *cluster, l *ledger) (*verdict, error) {
	v := &verdict{}
	v.duplicates = append(v.duplicates, l.dups...)
	byAddr := map[netip.Addr]string{}
	seen := map[string]bool{}
	cont := ""
	for {
		var list ipamv1.OverlappingRangeIPReservationList
		if err := c.client.List(ctx, &list, client.MatchingLabels{ipamv1.PoolLabel: poolName}, client.Limit(5000), client.Continue(cont)); err != nil {
			return nil, err
		}
		for _, r := range list.Items {
			v.reservations++
			a, err := netip.ParseAddr(r.Spec.Address)
			if err != nil {
				return nil, fmt.Errorf("reservation %s: %w", r.Name, err)
			}
			if prev, dup := byAddr[a]; dup {
				v.duplicates = append(v.duplicates, fmt.Sprintf("%s held by %s and %s", a, prev, r.Spec.ContainerID))
			}
			byAddr[a] = r.Spec.ContainerID
			seen[r.Spec.ContainerID] = true
			at, live := l.live[r.Spec.ContainerID]
			switch {
			case !live && l.unsure[r.Spec.ContainerID]:
				v.unsure++
			case !live:
				v.extra = append(v.extra, r.Name)
			case at.addr != a || at.node != r.Spec.Node:
				v.duplicates = append(v.duplicates, fmt.Sprintf("%s: the runtime has %s on %s, the API server %s on %s",
					r.Spec.ContainerID, at.addr, at.node, a, r.Spec.Node))
			}
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	for id := range l.live {
		if !seen[id] {
			v.lost = append(v.lost, id)
		}
	}
	for cont = ""; ; {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(ipamv1.GroupVersion.WithKind("IPPoolSliceList"))
		if err := c.client.List(ctx, list, client.MatchingLabels{ipamv1.PoolLabel: poolName}, client.Limit(5000), client.Continue(cont)); err != nil {
			return nil, err
		}
		v.slices += len(list.Items)
		if cont = list.Continue; cont == "" {
			return v, nil
		}
	}
}

func (v *verdict) ok() bool { return len(v.duplicates) == 0 && len(v.lost) == 0 && len(v.extra) == 0 }

// baseline is the raw Create of a tiny custom resource, in the same run and with the same agents
// connected: the cheapest write the API server does, against which an ADD's cost is judged.
type baseline struct {
	name    string
	short   string // in the ratios of each phase
	creates int
	fails   int
	wall    time.Duration
	before  snapshot
	after   snapshot
	// watches are the label-selected watches of the created kind that were open (the watched
	// baseline), delivered the events they received.
	watches, delivered int
	// watchesEnded are the watches the API server ended before the baseline was done: their
	// events were not delivered, nor offered.
	watchesEnded int
}

// rawCreates creates n objects made by mk from this warm process, parallel at a time, and runs
// settled (when not nil) before the closing snapshot; cleanRaw deletes them again (outside the
// measurement).
func rawCreates(ctx context.Context, c *cluster, s *sampler, name string, n, parallel int, mk func(i int) client.Object, settled func()) (*baseline, error) {
	b := &baseline{name: name, creates: n}
	var err error
	if b.before, err = s.take(ctx); err != nil {
		return nil, err
	}
	var fails atomic.Int64
	began := time.Now()
	fanout.Each(n, parallel, func(i int) {
		if err := c.client.Create(ctx, mk(i)); err != nil {
			fails.Add(1)
		}
	})
	b.wall = time.Since(began)
	if settled != nil {
		settled()
	}
	if b.after, err = s.take(ctx); err != nil {
		return nil, err
	}
	b.fails = int(fails.Load())
	return b, nil
}

// benchObject is the unwatched tiny custom resource of testdata/benchobject-crd.yaml.
func benchObject(i int) client.Object {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion("bench.netpool.io/v1")
	o.SetKind("BenchObject")
	o.SetName(fmt.Sprintf("raw-%d", i))
	o.Object["spec"] = map[string]any{"value": "x"}
	return o
}

// rawNode is the node of the raw reservations: no agent's, so no agent receives them, but every
// agent's watch of reservations is offered them.
const rawNode = "raw-create-nobody"

// tinyReservation is a reservation of no agent's node, in a pool of its own.
func tinyReservation(i int) client.Object {
	a := netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
	return &ipamv1.OverlappingRangeIPReservation{
		ObjectMeta: metav1.ObjectMeta{Name: ipamv1.ReservationName("raw", a),
			Labels: map[string]string{ipamv1.NodeLabel: rawNode, ipamv1.PoolLabel: "raw"}},
		Spec: ipamv1.OverlappingRangeIPReservationSpec{Address: a.String(), Pool: "raw",
			ContainerID: fmt.Sprintf("raw%d", i), IfName: "net1", Node: rawNode},
	}
}

// cleanRaw deletes what rawCreates made.
func cleanRaw(ctx context.Context, c *cluster) error {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion("bench.netpool.io/v1")
	o.SetKind("BenchObject")
	if err := c.client.DeleteAllOf(ctx, o); err != nil {
		return err
	}
	return c.client.DeleteAllOf(ctx, &ipamv1.OverlappingRangeIPReservation{}, client.MatchingLabels{ipamv1.PoolLabel: "raw"})
}
