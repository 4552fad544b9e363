package kubestore

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	// sliceLists counts the lists of whole IPPoolSlices (those of cooling addresses), which
	// requests counts together with the lists of their names (metadata only).
	sliceLists atomic.Int32
}

func (s *slowAPI) wrap(rt http.RoundTripper) http.RoundTripper {
	s.requests.by = map[string]int{}
	s.next = s.requests.wrap(rt)
	return s
}

func (s *slowAPI) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/ippoolslices") && r.URL.Query().Get("watch") != "true" &&
		!strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadataList") {
		s.sliceLists.Add(1)
	}
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
	const delay = 200 * time.Millisecond
	const bound = 4 * time.Second
	slow := &slowAPI{delay: delay}
	n := &node{store: MustStart(t, env, "node-slow", Options{APITimeout: bound}, slow.wrap)}

	t.Run("concurrent ADDs that borrow", func(t *testing.T) {
		by, _ := borrowBurst(t, env, n, slow, "ops-slow", "10.74.0", "", nil)
		// They share lists of the pool: one in flight serves every ADD that came to need it before
		// it began, so a burst lists a few times, not once per ADD. So do the lists of the pool's
		// slices that show every block held (24 before they were shared).
		if lists := by["GET overlappingrangeipreservations"]; lists > borrowers/4 {
			t.Errorf("%d lists of the pool for %d borrowing ADDs, want them shared (at most %d)", lists, borrowers, borrowers/4)
		}
		if lists := by["GET ippoolslices"]; lists > borrowers/4 {
			t.Errorf("%d lists of the pool's slices for %d borrowing ADDs, want them shared (at most %d)", lists, borrowers, borrowers/4)
		}
	})

	t.Run("concurrent ADDs that borrow under a cool-down", func(t *testing.T) {
		// The other node records eight releases of its first block as cooling: a borrower lists the
		// pool's slices to pass over them. The burst shares that list as it shares the list of
		// reservations; unshared, it made one per ADD (24).
		released := metav1.NewTime(time.Now().Add(-time.Minute))
		var cooling []ipamv1.CoolingAddress
		for i := 1; i <= 8; i++ {
			cooling = append(cooling, ipamv1.CoolingAddress{Address: fmt.Sprintf("10.150.0.%d", i), ReleasedAt: released})
		}
		by, got := borrowBurst(t, env, n, slow, "ops-slow-cool", "10.150.0", "1h", cooling)
		if lists := slow.sliceLists.Load(); lists > borrowers/4 {
			t.Errorf("%d lists of the pool's slices for their cooling addresses for %d borrowing ADDs, want them shared (at most %d)", lists, borrowers, borrowers/4)
		}
		if lists := by["GET ippoolslices"]; lists > borrowers/2 {
			t.Errorf("%d lists of the pool's slices (their names and their cooling addresses) for %d borrowing ADDs, want them shared (at most %d)", lists, borrowers, borrowers/2)
		}
		if lists := by["GET overlappingrangeipreservations"]; lists > borrowers/4 {
			t.Errorf("%d lists of the pool for %d borrowing ADDs, want them shared (at most %d)", lists, borrowers, borrowers/4)
		}
		for _, c := range cooling {
			if a := netip.MustParseAddr(c.Address); slices.Contains(got, a) {
				t.Errorf("a borrower got %s, which the other node records as cooling, while the pool had other free addresses", a)
			}
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

// borrowers is how many ADDs borrowBurst makes at once.
const borrowers = 24

// borrowBurst makes borrowers concurrent ADDs on n to a new pool of 10.<net>.0/26 whose four
// blocks are all another node's (the first recording cooling, when a cool-down is set), so that
// each ADD lists the pool's reservations and creates one on a free address: two requests, 400 ms
// at slow's delay; taken one after another, the 24 ADDs would need 9.6 s, more than twice their
// bound. It checks that every ADD succeeded with an address of its own, and returns the requests
// made (slow's counts are reset first) and the addresses.
func borrowBurst(t *testing.T, env *envtest.Env, n *node, slow *slowAPI, name, net, cooldown string, cooling []ipamv1.CoolingAddress) (map[string]int, []netip.Addr) {
	t.Helper()
	ctx := context.Background()
	pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: ipamv1.IPPoolSpec{Range: net + ".0/26", SliceSize: 28, ReuseCooldown: cooldown}}
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		sl := &ipamv1.IPPoolSlice{
			ObjectMeta: metav1.ObjectMeta{Name: ipamv1.SliceName(pool.Name, uint64(i))},
			Spec:       ipamv1.IPPoolSliceSpec{Pool: pool.Name, Range: fmt.Sprintf("%s.%d/28", net, 16*i), Node: "node-elsewhere"},
		}
		if i == 0 {
			sl.Spec.Cooling = cooling
		}
		if err := env.Client.Create(ctx, sl); err != nil {
			t.Fatal(err)
		}
	}
	// The store's cache holds only its own node's slices: it learns that node-elsewhere holds
	// every block by claiming (one Create each at most) and a live list of the pool's slices.
	cs := conf("net-"+name, fmt.Sprintf(`,"pool":%q`, name))
	slow.requests.take()
	slow.sliceLists.Store(0)
	got := make([]netip.Addr, borrowers)
	errs := make([]error, borrowers)
	took := make([]time.Duration, borrowers)
	var wg sync.WaitGroup
	for i := range borrowers {
		wg.Go(func() {
			start := time.Now()
			var a []netip.Addr
			a, errs[i] = n.add(cs, "", fmt.Sprintf("%s-%d", name, i))
			took[i] = time.Since(start)
			if errs[i] == nil {
				got[i] = a[0]
			}
		})
	}
	wg.Wait()
	seen := map[netip.Addr]int{}
	slowest := time.Duration(0)
	var addrs []netip.Addr
	for i := range borrowers {
		slowest = max(slowest, took[i])
		if errs[i] != nil {
			t.Errorf("ADD %s-%d after %v: %v", name, i, took[i].Round(time.Millisecond), errs[i])
			continue
		}
		if j, dup := seen[got[i]]; dup {
			t.Errorf("%s-%d and %s-%d both got %s", name, j, name, i, got[i])
		}
		seen[got[i]] = i
		addrs = append(addrs, got[i])
	}
	by := slow.requests.take()
	t.Logf("%d concurrent borrowing ADDs with %v per request: the slowest took %v; requests %v, %d lists of whole slices",
		borrowers, slow.delay, slowest.Round(time.Millisecond), by, slow.sliceLists.Load())
	var list ipamv1.OverlappingRangeIPReservationList
	if err := env.Client.List(ctx, &list, client.MatchingLabels{ipamv1.PoolLabel: pool.Name}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(seen) {
		t.Errorf("%d reservations in %s for %d ADDs that succeeded", len(list.Items), pool.Name, len(seen))
	}
	return by, addrs
}
