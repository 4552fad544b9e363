package kubestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
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
	// loseDeletes is how many reservation Deletes are sent and then answered with a connection
	// error: the object is gone, the store does not know. downAfterLoss applies to them too.
	loseDeletes int
	// deaf cuts the informer of reservations off, as an outage does: its watch streams are closed
	// and its lists and new watches fail, so it reports nothing until deaf is cleared.
	deaf bool
	// streams are the open watch streams of reservations, which setDeaf closes.
	streams []io.Closer
	// holdRead, when set, holds the answer to a read of that reservation: the read is sent and
	// answered, held reports it, and the answer goes to the store once release is closed.
	holdRead      string
	held, release chan struct{}
}

// setDeaf cuts the reservation informer off (on) or lets it reconnect (off).
func (f *faults) setDeaf(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deaf = on
	if on {
		for _, c := range f.streams {
			_ = c.Close()
		}
		f.streams = nil
	}
}

// informerRequest reports whether req is the reservation informer's: a watch of reservations, or
// the list by node label that starts one (the store's own reads never select by node).
func informerRequest(req *http.Request) bool {
	if req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/overlappingrangeipreservations") {
		return false
	}
	q := req.URL.Query()
	return q.Get("watch") == "true" || strings.Contains(q.Get("labelSelector"), ipamv1.NodeLabel)
}

func (f *faults) set(fn func(*faults)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *faults) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		f.mu.Lock()
		informer := informerRequest(req)
		down := f.down || (f.downDeletes && req.Method == http.MethodDelete) ||
			(f.failSliceDeletes && req.Method == http.MethodDelete && strings.Contains(req.URL.Path, "/ippoolslices/")) ||
			(f.deaf && informer)
		createRes := req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/overlappingrangeipreservations")
		deleteRes := req.Method == http.MethodDelete && strings.Contains(req.URL.Path, "/overlappingrangeipreservations/")
		lose := createRes && f.loseCreates > 0 || deleteRes && f.loseDeletes > 0
		status := f.status
		switch {
		case lose && createRes:
			f.loseCreates--
		case lose:
			f.loseDeletes--
		}
		f.mu.Unlock()
		if down {
			return nil, errors.New("dial tcp: connect: connection refused (injected)")
		}
		if req.Method == http.MethodGet && f.holdRead != "" && strings.HasSuffix(req.URL.Path, "/overlappingrangeipreservations/"+f.holdRead) {
			resp, err := rt.RoundTrip(req)
			f.mu.Lock()
			held, release := f.held, f.release
			f.holdRead = ""
			f.mu.Unlock()
			close(held)
			<-release
			return resp, err
		}
		if informer && req.URL.Query().Get("watch") == "true" {
			resp, err := rt.RoundTrip(req)
			if err == nil {
				f.mu.Lock()
				f.streams = append(f.streams, resp.Body)
				f.mu.Unlock()
			}
			return resp, err
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

func addressesOf(rs []ipamv1.OverlappingRangeIPReservation) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Spec.Address
	}
	return out
}

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

	t.Run("a claim its attachment settles while a background pass is under way stays", func(t *testing.T) {
		cs := conf("net-u10", `,"range":"10.70.0.0/24"`)
		n.mustAdd(t, cs, "warm")
		f.set(func(f *faults) { f.loseCreates, f.downAfterLoss = 1, true })
		if _, err := n.add(cs, "", "u10"); !errors.Is(err, allocator.ErrStoreBusy) {
			t.Fatalf("ADD during the outage = %v, want store busy", err)
		}
		f.set(func(f *faults) { f.down, f.downAfterLoss = false, false })
		// A background pass takes the pending claims and comes to this one late, as a pass over many
		// claims does while the API server warms up; meanwhile the runtime retries the ADD, which
		// adopts the claim and is answered its address.
		claims := s.pendingClaims()
		got, err := n.add(cs, "", "u10")
		if err != nil {
			t.Fatalf("retried ADD = %v", err)
		}
		s.resolveClaims(context.Background(), claims)
		if rs := ownerReservations(t, env, "u10"); len(rs) != 1 || rs[0].Spec.Address != got[0].String() {
			t.Errorf("the retried ADD was answered %s, but u10's reservations are %v after the pass", got[0], addressesOf(rs))
		}
		if s.Pending() != 0 {
			t.Errorf("pending = %d", s.Pending())
		}
	})

	t.Run("a rollback whose Delete lost its answer: the retry reads the claim back, not the index", func(t *testing.T) {
		base := `,"range":"10.71.0.0/24","ipRanges":[{"range":"fd71::/64"}]`
		n.mustAdd(t, conf("net-u11", base), "holder") // holds 10.71.0.1 and fd71::1
		// The ADD claims 10.71.0.2, then fails on the requested fd71::1; the Delete that rolls the
		// claim back lands but its answer is lost, and the outage that follows keeps the informer
		// from telling the index.
		f.setDeaf(true)
		defer f.setDeaf(false)
		f.set(func(f *faults) { f.loseDeletes, f.downAfterLoss = 1, true })
		cs := strings.Replace(conf("net-u11", base), `"ipam"`, `"runtimeConfig":{"ips":["fd71::1"]},"ipam"`, 1)
		if _, err := n.add(cs, "", "u11"); !errors.Is(err, allocator.ErrAddressInUse) || !strings.Contains(err.Error(), "failed to roll back reservation 10.71.0.2") {
			t.Fatalf("ADD = %v, want address in use and a failed rollback", err)
		}
		if rs := ownerReservations(t, env, "u11"); len(rs) != 0 || s.Pending() != 1 {
			t.Fatalf("%d reservations of u11 and %d pending; want the Delete landed and its claim pending", len(rs), s.Pending())
		}
		f.set(func(f *faults) { f.down, f.downAfterLoss = false, false })
		// The runtime's retry, no longer asking for the address in use, must hold what it is told.
		got, err := n.add(conf("net-u11", base), "", "u11")
		if err != nil {
			t.Fatalf("retried ADD = %v", err)
		}
		held := addressesOf(ownerReservations(t, env, "u11"))
		for _, a := range got {
			if !slices.Contains(held, a.String()) {
				t.Errorf("the retried ADD was answered %s, which no reservation of u11 holds (u11 holds %v)", a, held)
			}
		}
	})

	t.Run("a DEL whose Delete lost its answer: the next call reads the reservation back", func(t *testing.T) {
		cs := conf("net-u12", `,"range":"10.72.0.0/24"`)
		n.mustAdd(t, cs, "u12")
		f.setDeaf(true)
		defer f.setDeaf(false)
		f.set(func(f *faults) { f.loseDeletes, f.downAfterLoss = 1, true })
		if _, err := n.del(cs, "u12"); !errors.Is(err, allocator.ErrStoreBusy) {
			t.Fatalf("DEL = %v, want store busy", err)
		}
		if rs := ownerReservations(t, env, "u12"); len(rs) != 0 {
			t.Fatalf("%d reservations of u12; want the lost Delete landed", len(rs))
		}
		f.set(func(f *faults) { f.down, f.downAfterLoss = false, false })
		// An ADD of the attachment now (a runtime that gave up on the DEL) must hold what it is told.
		got, err := n.add(cs, "", "u12")
		if err != nil {
			t.Fatalf("ADD = %v", err)
		}
		if held := addressesOf(ownerReservations(t, env, "u12")); !slices.Contains(held, got[0].String()) {
			t.Errorf("the ADD was answered %s, which no reservation of u12 holds (u12 holds %v)", got[0], held)
		}
	})

	t.Run("a claim that never landed leaves the address's next holder in the index", func(t *testing.T) {
		cs := conf("net-u13", `,"range":"10.73.0.0/24"`)
		n.mustAdd(t, cs, "warm") // 10.73.0.1
		// The Create of 10.73.0.2 for u13a is refused before it is sent, which the store cannot
		// tell from an answer lost: the claim is pending, and nothing landed.
		f.set(func(f *faults) { f.down = true })
		if _, err := n.add(cs, "", "u13a"); !errors.Is(err, allocator.ErrStoreBusy) {
			t.Fatalf("ADD during the outage = %v, want store busy", err)
		}
		f.set(func(f *faults) { f.down = false })
		// The background pass reads 10.73.0.2 and finds nothing; before it acts on that, another
		// attachment of the node claims the free address.
		held, release := make(chan struct{}), make(chan struct{})
		f.set(func(f *faults) { f.holdRead, f.held, f.release = "10.73.0.2", held, release })
		claims := s.pendingClaims()
		passed := make(chan struct{})
		go func() { s.resolveClaims(context.Background(), claims); close(passed) }()
		<-held
		if got, err := n.add(cs, "IP=10.73.0.2", "u13b"); err != nil || got[0].String() != "10.73.0.2" {
			t.Fatalf("ADD asking for 10.73.0.2 = %v, %v", got, err)
		}
		close(release)
		<-passed
		// u13b's DEL must find what it holds and release it.
		if rel, err := n.del(cs, "u13b"); err != nil || len(rel) != 1 {
			t.Errorf("DEL of u13b = %v, %v; want its address released", rel, err)
		}
		if rs := ownerReservations(t, env, "u13b"); len(rs) != 0 {
			t.Errorf("u13b's reservations after its DEL: %v", addressesOf(rs))
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
