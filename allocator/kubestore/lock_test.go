package kubestore

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/envtest"
)

// slowAPI delays each request of a store but the informers' by delay, as an API server on a loaded
// machine answers: every request takes its time, and a call that has to wait for other calls'
// requests as well as its own runs out of its bound.
type slowAPI struct {
	delay time.Duration
	next  http.RoundTripper
	// requests counts what the store asks, as counter does.
	requests counter
}

func (s *slowAPI) wrap(rt http.RoundTripper) http.RoundTripper {
	s.requests.by = map[string]int{}
	s.next = s.requests.wrap(rt)
	return s
}

func (s *slowAPI) RoundTrip(r *http.Request) (*http.Response, error) {
	if !informerRequest(r) {
		select {
		case <-time.After(s.delay):
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return s.next.RoundTrip(r)
}

// TestSlowAPIServerQueuesNoCall: the node-local lock of a pool is never held across an API call,
// so one node's concurrent ADDs to one pool cost each its own requests, not the sum of the requests
// of those queued before it. A clean-clone run at load average 20 failed fifteen of sixty ADDs to
// an exhausted pool with "timed out waiting for the node-local lock": each one borrowing, which
// lists the pool and creates, did so holding the lock.
func TestSlowAPIServerQueuesNoCall(t *testing.T) {
	env := envtest.Shared(t)
	ctx := context.Background()
	const delay = 200 * time.Millisecond
	const bound = 4 * time.Second
	slow := &slowAPI{delay: delay}
	n := &node{store: MustStart(t, env, "node-slow", Options{APITimeout: bound}, slow.wrap)}

	t.Run("concurrent ADDs that borrow", func(t *testing.T) {
		// Every block of the pool is another node's, so each ADD lists the pool's reservations and
		// creates one on a free address: two requests, 400 ms here. Taken one after another, the
		// 24 ADDs would need 9.6 s, more than twice their bound.
		pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "ops-slow"},
			Spec: ipamv1.IPPoolSpec{Range: "10.74.0.0/26", SliceSize: 28}}
		if err := env.Client.Create(ctx, pool); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			sl := &ipamv1.IPPoolSlice{
				ObjectMeta: metav1.ObjectMeta{Name: ipamv1.SliceName(pool.Name, uint64(i))},
				Spec:       ipamv1.IPPoolSliceSpec{Pool: pool.Name, Range: fmt.Sprintf("10.74.0.%d/28", 16*i), Node: "node-elsewhere"},
			}
			if err := env.Client.Create(ctx, sl); err != nil {
				t.Fatal(err)
			}
		}
		// The store's cache holds only its own node's slices: it learns that node-elsewhere holds
		// every block by claiming (one Create each at most) and a live list of the pool's slices.
		cs := conf("net-slow", `,"pool":"ops-slow"`)
		slow.requests.take()
		const adds = 24
		got := make([]netip.Addr, adds)
		errs := make([]error, adds)
		took := make([]time.Duration, adds)
		var wg sync.WaitGroup
		for i := range adds {
			wg.Go(func() {
				start := time.Now()
				var a []netip.Addr
				a, errs[i] = n.add(cs, "", fmt.Sprintf("slow-%d", i))
				took[i] = time.Since(start)
				if errs[i] == nil {
					got[i] = a[0]
				}
			})
		}
		wg.Wait()
		seen := map[netip.Addr]int{}
		slowest := time.Duration(0)
		for i := range adds {
			slowest = max(slowest, took[i])
			if errs[i] != nil {
				t.Errorf("ADD slow-%d after %v: %v", i, took[i].Round(time.Millisecond), errs[i])
				continue
			}
			if j, dup := seen[got[i]]; dup {
				t.Errorf("slow-%d and slow-%d both got %s", j, i, got[i])
			}
			seen[got[i]] = i
		}
		by := slow.requests.take()
		t.Logf("%d concurrent borrowing ADDs with %v per request: the slowest took %v; requests %v", adds, delay, slowest.Round(time.Millisecond), by)
		// They share lists of the pool: one in flight serves every ADD that came to need it before
		// it began, so a burst lists a few times, not once per ADD.
		if lists := by["GET overlappingrangeipreservations"]; lists > adds/4 {
			t.Errorf("%d lists of the pool for %d borrowing ADDs, want them shared (at most %d)", lists, adds, adds/4)
		}
		var list ipamv1.OverlappingRangeIPReservationList
		if err := env.Client.List(ctx, &list, client.MatchingLabels{ipamv1.PoolLabel: pool.Name}); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != len(seen) {
			t.Errorf("%d reservations in %s for %d ADDs that succeeded", len(list.Items), pool.Name, len(seen))
		}
	})

	t.Run("concurrent first uses of an inline pool", func(t *testing.T) {
		// A burst on a new network: every ADD finds the pool missing. They share one Create.
		cs := conf("net-slow-new", `,"range":"10.75.0.0/24"`)
		slow.requests.take()
		const adds = 24
		errs := make([]error, adds)
		var wg sync.WaitGroup
		for i := range adds {
			wg.Go(func() { _, errs[i] = n.add(cs, "", fmt.Sprintf("new-%d", i)) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("ADD new-%d: %v", i, err)
			}
		}
		by := slow.requests.take()
		if creates := by["POST ippools"]; creates != 1 {
			t.Errorf("%d Creates of the inline pool for %d concurrent first uses, want 1 (requests %v)", creates, adds, by)
		}
	})
}
