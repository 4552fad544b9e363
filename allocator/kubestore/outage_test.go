package kubestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
	"github.com/netpool/netpool/test/envtest"
)

// faults injects API failures into a store's HTTP transport.
type faults struct {
	mu sync.Mutex
	// down fails every request before it is sent, as a stopped API server does.
	down bool
	// downDeletes fails every DELETE before it is sent.
	downDeletes bool
	// loseCreates is how many reservation Creates are sent and then answered with a connection
	// error: the object exists, the store does not know.
	loseCreates int
	// downAfterLoss sets down once a Create has been lost.
	downAfterLoss bool
	// status answers reservation Creates with this HTTP status (and a Status body) when not 0.
	status int
	// failSliceDeletes fails every DELETE of an IPPoolSlice before it is sent.
	failSliceDeletes bool
}

func (f *faults) set(fn func(*faults)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *faults) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		f.mu.Lock()
		down := f.down || (f.downDeletes && req.Method == http.MethodDelete) ||
			(f.failSliceDeletes && req.Method == http.MethodDelete && strings.Contains(req.URL.Path, "/ippoolslices/"))
		createRes := req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/overlappingrangeipreservations")
		lose := createRes && f.loseCreates > 0
		status := f.status
		if lose {
			f.loseCreates--
		}
		f.mu.Unlock()
		if down {
			return nil, errors.New("dial tcp: connect: connection refused (injected)")
		}
		if createRes && status != 0 {
			body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected %d","code":%d}`, status, status)
			return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
		}
		resp, err := rt.RoundTrip(req)
		if lose && err == nil {
			_ = resp.Body.Close()
			f.set(func(f *faults) { f.down = f.down || f.downAfterLoss })
			return nil, errors.New("read: connection reset by peer (injected)")
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func ownerReservations(t *testing.T, env *envtest.Env, id string) []ipamv1.OverlappingRangeIPReservation {
	t.Helper()
	var out []ipamv1.OverlappingRangeIPReservation
	for _, r := range reservations(t, env) {
		if r.Spec.ContainerID == id {
			out = append(out, r)
		}
	}
	return out
}

// TestUnknownOutcomes covers Creates whose answer is lost: nothing is leaked and nothing is held
// twice, whether the attachment comes back, goes away, or the call can read its own claim back.
func TestUnknownOutcomes(t *testing.T) {
	env := envtest.Shared(t)
	env.WarmUp(t)
	f := &faults{}
	bound := time.Second
	s := MustStart(t, env, "node-f", Options{APITimeout: bound, RetryInterval: 20 * time.Millisecond, ResolveInterval: time.Hour}, f.wrap)
	n := &node{store: s}

	t.Run("lost answer, API server back within the call: the call reads its claim back", func(t *testing.T) {
		cs := conf("net-u1", `,"range":"10.60.0.0/24"`)
		f.set(func(f *faults) { f.loseCreates = 1 })
		got, err := n.add(cs, "", "u1")
		if err != nil {
			t.Fatal(err)
		}
		if rs := ownerReservations(t, env, "u1"); len(rs) != 1 || rs[0].Spec.Address != got[0].String() {
			t.Errorf("reservations of u1 = %v, want one for %s", rs, got[0])
		}
		if s.Pending() != 0 {
			t.Errorf("pending = %d", s.Pending())
		}
	})

	t.Run("lost answer, then outage: the call fails with 11, the retry adopts the claim", func(t *testing.T) {
		cs := conf("net-u2", `,"range":"10.61.0.0/24"`)
		n.mustAdd(t, cs, "warm") // the pool exists and the node has a block
		f.set(func(f *faults) { f.loseCreates, f.downAfterLoss = 1, true })
		start := time.Now()
		_, err := n.add(cs, "", "u2")
		if !errors.Is(err, allocator.ErrStoreBusy) || !strings.Contains(err.Error(), "reservation 10.61.0.2 may exist") {
			t.Fatalf("ADD during the outage = %v", err)
		}
		if d := time.Since(start); d > bound+time.Second {
			t.Errorf("ADD took %v with a %v bound", d, bound)
		}
		if rs := ownerReservations(t, env, "u2"); len(rs) != 1 || s.Pending() != 1 {
			t.Fatalf("%d reservations of u2 and %d pending; the lost Create landed", len(rs), s.Pending())
		}
		// Still down: the same attachment cannot be told "nothing held".
		if _, err := n.add(cs, "", "u2"); !errors.Is(err, allocator.ErrStoreBusy) || !strings.Contains(err.Error(), "an earlier claim of u2/net1 (reservation 10.61.0.2) has an unknown outcome") {
			t.Errorf("repeated ADD during the outage = %v", err)
		}
		f.set(func(f *faults) { f.down, f.downAfterLoss = false, false })
		got, err := n.add(cs, "", "u2")
		if err != nil || got[0].String() != "10.61.0.2" {
			t.Errorf("ADD after the outage = %v, %v, want the claim made during it", got, err)
		}
		if rs := ownerReservations(t, env, "u2"); len(rs) != 1 || s.Pending() != 0 {
			t.Errorf("%d reservations of u2 and %d pending", len(rs), s.Pending())
		}
	})

	t.Run("lost answer, attachment never comes back: the background loop deletes the claim", func(t *testing.T) {
		cs := conf("net-u3", `,"range":"10.62.0.0/24"`)
		n.mustAdd(t, cs, "warm")
		f.set(func(f *faults) { f.loseCreates, f.downAfterLoss = 1, true })
		if _, err := n.add(cs, "", "u3"); !errors.Is(err, allocator.ErrStoreBusy) {
			t.Fatalf("ADD = %v", err)
		}
		s.resolvePending(context.Background()) // still down: nothing happens
		if s.Pending() != 1 || len(ownerReservations(t, env, "u3")) != 1 {
			t.Fatalf("pending %d", s.Pending())
		}
		f.set(func(f *faults) { f.down, f.downAfterLoss = false, false })
		s.resolvePending(context.Background())
		if s.Pending() != 0 || len(ownerReservations(t, env, "u3")) != 0 {
			t.Errorf("after resolution: %d pending, %d reservations of u3", s.Pending(), len(ownerReservations(t, env, "u3")))
		}
	})

	t.Run("lost answer, then DEL of the attachment deletes the claim", func(t *testing.T) {
		cs := conf("net-u4", `,"range":"10.63.0.0/24"`)
		n.mustAdd(t, cs, "warm")
		f.set(func(f *faults) { f.loseCreates, f.downAfterLoss = 1, true })
		if _, err := n.add(cs, "", "u4"); !errors.Is(err, allocator.ErrStoreBusy) {
			t.Fatalf("ADD = %v", err)
		}
		if _, err := n.del(cs, "u4"); !errors.Is(err, allocator.ErrStoreBusy) {
			t.Errorf("DEL during the outage = %v, want store busy rather than a silent leak", err)
		}
		f.set(func(f *faults) { f.down, f.downAfterLoss = false, false })
		if rel, err := n.del(cs, "u4"); err != nil || len(rel) != 1 {
			t.Errorf("DEL after the outage = %v, %v", rel, err)
		}
		if s.Pending() != 0 || len(ownerReservations(t, env, "u4")) != 0 {
			t.Errorf("after DEL: %d pending, %d reservations", s.Pending(), len(ownerReservations(t, env, "u4")))
		}
	})

	t.Run("failed rollback is finished in the background", func(t *testing.T) {
		base := `,"range":"10.64.0.0/24","ipRanges":[{"range":"fd64::/64"}]`
		n.mustAdd(t, conf("net-u5", base), "holder")
		cs := strings.Replace(conf("net-u5", base), `"ipam"`, `"runtimeConfig":{"ips":["fd64::1"]},"ipam"`, 1)
		f.set(func(f *faults) { f.downDeletes = true })
		_, err := n.add(cs, "", "u5")
		if !errors.Is(err, allocator.ErrAddressInUse) || !strings.Contains(err.Error(), "failed to roll back reservation 10.64.0.2") {
			t.Fatalf("ADD = %v", err)
		}
		if s.Pending() != 1 || len(ownerReservations(t, env, "u5")) != 1 {
			t.Fatalf("pending %d", s.Pending())
		}
		f.set(func(f *faults) { f.downDeletes = false })
		s.resolvePending(context.Background())
		if s.Pending() != 0 || len(ownerReservations(t, env, "u5")) != 0 {
			t.Errorf("after resolution: %d pending, %d reservations of u5", s.Pending(), len(ownerReservations(t, env, "u5")))
		}
	})

	t.Run("definite refusals are not retried", func(t *testing.T) {
		cs := conf("net-u6", `,"range":"10.65.0.0/24"`)
		n.mustAdd(t, cs, "warm")
		f.set(func(f *faults) { f.status = http.StatusForbidden })
		// The outages injected above opened the RBAC warm-up window, in which a 403 is retried
		// and ends as busy (warmup.go); past the window it is a definite refusal.
		if _, err := n.add(cs, "", "u6"); !errors.Is(err, allocator.ErrStoreBusy) || !strings.Contains(err.Error(), "injected 403") {
			t.Errorf("ADD refused with 403 right after an outage = %v, want busy", err)
		}
		s.reach.last.Store(0)
		start := time.Now()
		_, err := n.add(cs, "", "u6")
		if !errors.Is(err, allocator.ErrStoreUnusable) || !strings.Contains(err.Error(), "injected 403") || time.Since(start) > bound/2 {
			t.Errorf("ADD refused with 403 = %v after %v", err, time.Since(start))
		}
		f.set(func(f *faults) { f.status = http.StatusTooManyRequests })
		_, err = n.add(cs, "", "u6")
		if !errors.Is(err, allocator.ErrStoreBusy) || strings.Contains(err.Error(), "may exist") {
			t.Errorf("ADD throttled with 429 = %v, want busy and no unknown outcome", err)
		}
		f.set(func(f *faults) { f.status = 0 })
		if s.Pending() != 0 || len(ownerReservations(t, env, "u6")) != 0 {
			t.Errorf("%d pending, %d reservations of u6", s.Pending(), len(ownerReservations(t, env, "u6")))
		}
		_, err = n.add(cs, "", "bad id")
		if !errors.Is(err, ipam.ErrInvalidConfig) || !strings.Contains(err.Error(), "spec.containerID") {
			t.Errorf("ADD with an invalid container ID = %v", err)
		}
	})

	t.Run("waiting for the node-local lock is bounded", func(t *testing.T) {
		cs := conf("net-u7", `,"range":"10.66.0.0/24"`)
		n.mustAdd(t, cs, "warm")
		st := s.poolStateFor("10.66.0.0-24")
		st.lock <- struct{}{}
		start := time.Now()
		_, err := n.add(cs, "", "u7")
		<-st.lock
		if !errors.Is(err, allocator.ErrStoreBusy) || !strings.Contains(err.Error(), "timed out waiting for the node-local lock of pool 10.66.0.0-24") {
			t.Errorf("ADD = %v", err)
		}
		if d := time.Since(start); d > bound+500*time.Millisecond {
			t.Errorf("waited %v with a %v bound", d, bound)
		}
	})

	t.Run("an empty block that cannot be given back is kept", func(t *testing.T) {
		pool := &ipamv1.IPPool{Spec: ipamv1.IPPoolSpec{Range: "10.68.0.0/27", SliceSize: 28}}
		pool.Name = "ops-keep"
		if err := env.Client.Create(context.Background(), pool); err != nil {
			t.Fatal(err)
		}
		cs := conf("net-u9", `,"pool":"ops-keep"`)
		for i := range 16 { // 15 fill the first block, the 16th claims the second
			n.mustAdd(t, cs, fmt.Sprintf("k%d", i))
		}
		f.set(func(f *faults) { f.failSliceDeletes = true })
		if _, err := n.del(cs, "k15"); err != nil {
			t.Fatalf("DEL = %v, want success: giving a block back is best effort", err)
		}
		f.set(func(f *faults) { f.failSliceDeletes = false })
		var slices ipamv1.IPPoolSliceList
		if err := env.Client.List(context.Background(), &slices); err != nil {
			t.Fatal(err)
		}
		count := 0
		for _, sl := range slices.Items {
			if sl.Spec.Pool == "ops-keep" {
				count++
			}
		}
		if count != 2 {
			t.Errorf("%d blocks of ops-keep, want both kept", count)
		}
		// The kept block is still the node's: the next ADD uses it.
		if got := n.mustAdd(t, cs, "k16"); !netip.MustParsePrefix("10.68.0.16/28").Contains(got) {
			t.Errorf("ADD = %s, want an address of the kept block", got)
		}
	})

	t.Run("first use of a pool during an outage", func(t *testing.T) {
		f.set(func(f *faults) { f.down = true })
		_, err := n.add(conf("net-u8", `,"range":"10.67.0.0/24"`), "", "u8")
		f.set(func(f *faults) { f.down = false })
		if !errors.Is(err, allocator.ErrStoreBusy) || !strings.Contains(err.Error(), "failed to create IPPool 10.67.0.0-24") {
			t.Errorf("ADD = %v", err)
		}
		var pools ipamv1.IPPoolList
		if err := env.Client.List(context.Background(), &pools); err != nil {
			t.Fatal(err)
		}
		for _, p := range pools.Items {
			if p.Name == "10.67.0.0-24" {
				t.Error("pool created although every request failed")
			}
		}
	})
}
