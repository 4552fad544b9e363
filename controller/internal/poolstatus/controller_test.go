package poolstatus

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/controller/internal/ctrltest"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/poll"
)

func TestPoolStatusCountsExactlyAfterABurstOf500AddsAndDeletes(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	f.Node("node-a")
	pool := f.Pool("burst", "10.10.0.0/22", "")
	m := startManager(t, ctrltest.TestOptions())

	// 500 operations from 25 workers, as ADDs and DELs would make them: 350 creates, and 150
	// deletes each following the create of its address.
	var ops []int
	for k := 1; k <= 350; k++ {
		ops = append(ops, k) // create the reservation of address offset k
		if k%7 == 1 || k%7 == 3 || k%7 == 5 {
			ops = append(ops, -k)
		}
	}
	if len(ops) != 500 {
		t.Fatalf("%d operations, want 500", len(ops))
	}
	var wg sync.WaitGroup
	work := make(chan int)
	errs := make(chan error, len(ops))
	for range 25 {
		wg.Go(func() {
			for op := range work {
				errs <- burstOp(f.C, pool.Name, op)
			}
		})
	}
	for _, op := range ops {
		work <- op
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	var list ipamv1.OverlappingRangeIPReservationList
	if err := f.C.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	want := int64(len(list.Items))
	if want != 200 {
		t.Fatalf("the burst left %d reservations, want 200", want)
	}
	poll.Eventually(t, 10*time.Second, "status counts the reservations", func() error {
		got := &ipamv1.IPPool{}
		if err := f.C.Get(context.Background(), client.ObjectKeyFromObject(pool), got); err != nil {
			return err
		}
		s := got.Status
		if s.Allocated == nil || *s.Allocated != want || s.Capacity != "1022" || s.Free != fmt.Sprint(1022-want) {
			return fmt.Errorf("status capacity=%q allocated=%v free=%q, want 1022/%d/%d", s.Capacity, ptrText(s.Allocated), s.Free, want, 1022-want)
		}
		return nil
	})
	labels := map[string]string{"pool": pool.Name}
	if got := m.Metric(t, "netpool_pool_allocated_addresses", labels); got != float64(want) {
		t.Errorf("netpool_pool_allocated_addresses = %v, want %d", got, want)
	}
	if got := m.Metric(t, "netpool_pool_free_addresses", labels); got != float64(1022-want) {
		t.Errorf("netpool_pool_free_addresses = %v, want %d", got, 1022-want)
	}
}

// burstOp creates (op > 0) or deletes (op < 0) the reservation of address 10.10.0.0 + |op|. A
// delete whose create has not happened yet waits for it, as a DEL follows its ADD.
func burstOp(c client.Client, pool string, op int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offset := op
	if op < 0 {
		offset = -op
	}
	addr := fmt.Sprintf("10.10.%d.%d", offset/256, offset%256)
	r := ctrltest.NewReservation(pool, addr, nil, "node-a")
	if op > 0 {
		return c.Create(ctx, r)
	}
	return poll.Until(ctx, 10*time.Millisecond, func(ctx context.Context) error { return c.Delete(ctx, r) })
}

func TestPoolStatusConditions(t *testing.T) {
	f := ctrltest.NewFixture(t, nil)
	f.Node("node-a")
	small := f.Pool("small", "10.11.0.0/29", "") // 6 usable addresses
	empty := &ipamv1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: "all-excluded"},
		Spec:       ipamv1.IPPoolSpec{Range: "10.12.0.0/30", Exclude: []string{"10.12.0.0/30"}},
	}
	f.Create(empty)
	wide := f.Pool("blue-wide", "10.13.0.0/24", "blue")
	narrow := f.Pool("blue-narrow", "10.13.0.128/25", "blue")
	other := f.Pool("red-same", "10.13.0.0/24", "red")
	startManager(t, ctrltest.TestOptions())

	var reservations []client.Object
	for i := 1; i <= 6; i++ {
		reservations = append(reservations, f.Reservation(small.Name, fmt.Sprintf("10.11.0.%d", i), nil, "node-a"))
	}
	wantConditions(f, small, "Ready=False/PoolExhausted Exhausted=True/PoolExhausted Invalid=False/ValidSpec", "0 of 6 addresses free")
	wantConditions(f, empty, "Ready=False/InvalidSpec Exhausted=True/PoolExhausted Invalid=True/InvalidSpec", "entirely excluded")
	wantConditions(f, wide, "Ready=False/InvalidSpec Exhausted=False/AddressesAvailable Invalid=True/InvalidSpec", "overlaps IPPool blue-narrow")
	wantConditions(f, narrow, "Ready=False/InvalidSpec Exhausted=False/AddressesAvailable Invalid=True/InvalidSpec", "overlaps IPPool blue-wide")
	wantConditions(f, other, "Ready=True/Available Exhausted=False/AddressesAvailable Invalid=False/ValidSpec", "254 of 254 addresses free")

	// A release frees an address; removing one of two overlapping pools makes the other valid.
	if err := f.C.Delete(context.Background(), reservations[0]); err != nil {
		t.Fatal(err)
	}
	if err := f.C.Delete(context.Background(), narrow); err != nil {
		t.Fatal(err)
	}
	wantConditions(f, small, "Ready=True/Available Exhausted=False/AddressesAvailable Invalid=False/ValidSpec", "1 of 6 addresses free")
	wantConditions(f, wide, "Ready=True/Available Exhausted=False/AddressesAvailable Invalid=False/ValidSpec", "254 of 254")
}

// wantConditions waits until pool's conditions read want ("Type=Status/Reason ..." in the order
// Ready, Exhausted, Invalid), all at the pool's generation, and Ready's message holds msg.
func wantConditions(f *ctrltest.Fixture, pool *ipamv1.IPPool, want, msg string) {
	t := f.T
	t.Helper()
	poll.Eventually(t, 10*time.Second, "conditions of IPPool "+pool.Name, func() error {
		got := &ipamv1.IPPool{}
		if err := f.C.Get(context.Background(), client.ObjectKeyFromObject(pool), got); err != nil {
			return err
		}
		var parts []string
		for _, typ := range []string{ipamv1.IPPoolReadyCondition, ipamv1.IPPoolExhaustedCondition, ipamv1.IPPoolInvalidCondition} {
			c := meta.FindStatusCondition(got.Status.Conditions, typ)
			if c == nil {
				return fmt.Errorf("no %s condition in %+v", typ, got.Status)
			}
			if c.ObservedGeneration != got.Generation {
				return fmt.Errorf("%s observedGeneration %d, want %d", typ, c.ObservedGeneration, got.Generation)
			}
			parts = append(parts, fmt.Sprintf("%s=%s/%s", typ, c.Status, c.Reason))
		}
		if s := strings.Join(parts, " "); s != want {
			return fmt.Errorf("conditions %s, want %s", s, want)
		}
		if got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("status.observedGeneration %d, want %d", got.Status.ObservedGeneration, got.Generation)
		}
		if ready := meta.FindStatusCondition(got.Status.Conditions, ipamv1.IPPoolReadyCondition); !strings.Contains(ready.Message, msg) {
			return fmt.Errorf("Ready message %q does not contain %q", ready.Message, msg)
		}
		return nil
	})
}

func ptrText(p *int64) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprint(*p)
}
