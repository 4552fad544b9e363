package kubestore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/poll"
)

// counter counts the API requests of one store by verb and resource ("POST ippoolslices"),
// watches left out: they are the informers' long-running streams, not work done per call.
type counter struct {
	mu   sync.Mutex
	by   map[string]int
	next http.RoundTripper
}

func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper { c.next = rt; return c }

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Query().Get("watch") != "true" {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		resource := ""
		for i, p := range parts { // .../v1alpha1/<resource>[/<name>]
			if p == "v1alpha1" || p == "v1" {
				if i+1 < len(parts) {
					resource = parts[i+1]
				}
			}
		}
		c.mu.Lock()
		c.by[r.Method+" "+resource]++
		c.mu.Unlock()
	}
	return c.next.RoundTrip(r)
}

// take returns the counts since the last take, and resets them.
func (c *counter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.by
	c.by = map[string]int{}
	return out
}

func writes(by map[string]int) int {
	n := 0
	for k, v := range by {
		if !strings.HasPrefix(k, "GET ") {
			n += v
		}
	}
	return n
}

// TestCooldownAPIRequests measures what a reuse cool-down costs in API requests per ADD+DEL, with
// and without one, on one node. Without one, a cycle is the reservation's Create and Delete and
// nothing else. With one, the node also records its releases on its slices, written behind and
// coalesced (one patch per changed block and CoolingFlushDelay), and it claims its next block
// sooner (one IPPoolSlice Create per block of cycles, while the pool has unclaimed blocks), as it
// may not reuse what it released. Two rates: cycles back to back (a burst, the patches coalesced)
// and one cycle per flush delay (each release its own patch, the most a cool-down costs).
// docs/kubernetes-mode.md and the README quote these figures.
func TestCooldownAPIRequests(t *testing.T) {
	env := envtest.Shared(t)
	const cycles = 48 // three blocks of 16 (/28, the default for a /24)
	for i, tt := range []struct {
		name, extra string
		flushDelay  time.Duration
		pause       time.Duration // between cycles
	}{
		{"without a cool-down", ``, 0, 0},
		{"with a cool-down of 1h, back to back", `,"reuseCooldown":"1h"`, DefaultCoolingFlushDelay, 0},
		// A shorter delay than the default, to spend less time on the same ratio.
		{"with a cool-down of 1h, one cycle per flush delay", `,"reuseCooldown":"1h"`, 100 * time.Millisecond, 200 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cnt := &counter{by: map[string]int{}}
			n := &node{store: MustStart(t, env, fmt.Sprintf("node-cool-count-%d", i), Options{CoolingFlushDelay: tt.flushDelay}, cnt.wrap)}
			net := fmt.Sprintf("cool-count-%d", i)
			c := conf(net, fmt.Sprintf(`,"network_name":%q,"range":"10.140.%d.0/24"`, net, i)+tt.extra)
			// The first cycle creates the derived pool and the first block: not per-cycle work.
			n.mustAdd(t, c, "warm")
			if _, err := n.del(c, "warm"); err != nil {
				t.Fatal(err)
			}
			if err := n.store.FlushCooling(context.Background()); err != nil {
				t.Fatal(err)
			}
			cnt.take()
			seen := map[string]bool{}
			start := time.Now()
			for i := range cycles {
				id := fmt.Sprintf("c%d", i)
				a := n.mustAdd(t, c, id)
				seen[a.String()] = true
				if _, err := n.del(c, id); err != nil {
					t.Fatal(err)
				}
				time.Sleep(tt.pause)
			}
			// What is still to be written is part of the cycles' cost.
			if err := n.store.FlushCooling(context.Background()); err != nil {
				t.Fatal(err)
			}
			elapsed := time.Since(start)
			by := cnt.take()
			t.Logf("%s, %d ADD+DEL cycles in %v: %d distinct addresses, requests %v (%.2f writes per cycle)",
				tt.name, cycles, elapsed.Round(time.Millisecond), len(seen), by, float64(writes(by))/cycles)
			if by["POST overlappingrangeipreservations"] != cycles || by["DELETE overlappingrangeipreservations"] != cycles {
				t.Errorf("reservation Creates/Deletes = %d/%d, want %d each", by["POST overlappingrangeipreservations"], by["DELETE overlappingrangeipreservations"], cycles)
			}
			if reads := by["GET ippoolslices"] + by["GET overlappingrangeipreservations"]; reads != 0 {
				t.Errorf("%d reads, want none", reads)
			}
			slices, patches := by["POST ippoolslices"], by["PATCH ippoolslices"]
			if tt.extra == "" {
				if writes(by) != 2*cycles {
					t.Errorf("without a cool-down: %d writes, want exactly %d (Create and Delete per cycle)", writes(by), 2*cycles)
				}
				return
			}
			if len(seen) != cycles {
				t.Errorf("with a cool-down of 1h, %d cycles used %d distinct addresses, want %d", cycles, len(seen), cycles)
			}
			// Each flush writes each block changed since the last once: at most one patch per
			// block touched and flush window, plus the final flush, and never more than one per
			// release.
			blocks := cycles/16 + 1
			windows := int(elapsed/max(tt.flushDelay, time.Millisecond)) + 1
			if writes(by) != 2*cycles+slices+patches || slices > blocks || patches > min(cycles, blocks*windows) {
				t.Errorf("with a cool-down: %d writes of which %d slice Creates and %d slice patches; want %d plus at most %d Creates and %d patches",
					writes(by), slices, patches, 2*cycles, blocks, min(cycles, blocks*windows))
			}
		})
	}
}

// TestCooldownIsThePools: the cool-down is the IPPool's. A config referencing an operator's pool
// follows its spec.reuseCooldown; a config stating another value is refused claims (CNI error 7,
// naming both) but may still release; a derived pool records its first config's.
func TestCooldownIsThePools(t *testing.T) {
	env := envtest.Shared(t)
	ctx := context.Background()
	n := &node{store: MustStart(t, env, "node-cool-pool", Options{}, nil)}

	t.Run("a referenced pool's cool-down is followed", func(t *testing.T) {
		pool := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "ops-cool"},
			Spec: ipamv1.IPPoolSpec{Range: "10.141.0.0/24", NetworkName: "ops-cool", ReuseCooldown: "1h"}}
		if err := env.Client.Create(ctx, pool); err != nil {
			t.Fatal(err)
		}
		c := conf("net-ops-cool", `,"pool":"ops-cool"`)
		if got, err := n.add(c, "IP=10.141.0.1", "x"); err != nil || got[0].String() != "10.141.0.1" {
			t.Fatalf("ADD asking for 10.141.0.1 = %v, %v", got, err)
		}
		if _, err := n.del(c, "x"); err != nil {
			t.Fatal(err)
		}
		if got := n.mustAdd(t, c, "y"); got.String() == "10.141.0.1" {
			t.Errorf("the next ADD got the cooling 10.141.0.1")
		}
		bad := conf("net-ops-cool", `,"pool":"ops-cool","reuseCooldown":"30s"`)
		_, err := n.add(bad, "", "z")
		want := "reuseCooldown 30s disagrees with IPPool ops-cool, which records reuseCooldown 1h0m0s"
		if !errors.Is(err, ipam.ErrInvalidConfig) || err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ADD stating another cool-down = %v, want a config error containing %q", err, want)
		}
		if rel, err := n.del(bad, "y"); err != nil || len(rel) != 1 {
			t.Errorf("DEL through the disagreeing config = %v, %v; want y's address released", rel, err)
		}
	})

	t.Run("a derived pool records its first config's", func(t *testing.T) {
		first := conf("net-cool-derived", `,"network_name":"cool-derived","range":"10.142.0.0/24","reuseCooldown":"2m"`)
		n.mustAdd(t, first, "a")
		got := &ipamv1.IPPool{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "cool-derived-10.142.0.0-24"}, got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.ReuseCooldown != "2m0s" {
			t.Errorf("the derived pool records reuseCooldown %q, want 2m0s", got.Spec.ReuseCooldown)
		}
		silent := conf("net-cool-derived", `,"network_name":"cool-derived","range":"10.142.0.0/24"`)
		if _, err := n.add(silent, "", "b"); err != nil {
			t.Errorf("ADD by a config that leaves reuseCooldown out = %v, want it to follow the pool", err)
		}
		other := conf("net-cool-derived", `,"network_name":"cool-derived","range":"10.142.0.0/24","reuseCooldown":"0s"`)
		if _, err := n.add(other, "", "c"); err == nil || !strings.Contains(err.Error(), "reuseCooldown 0s disagrees with IPPool cool-derived-10.142.0.0-24, which records reuseCooldown 2m0s") {
			t.Errorf("ADD by a config stating 0s = %v, want it refused", err)
		}
	})
}

// TestCooldownOfReleasesElsewhere: a reservation of this node deleted by someone else (the
// controller's GC, a forced release) cools too, from when the informer reports it. The address was
// asked for by name, so without the cool-down the next ADD would get it straight back.
func TestCooldownOfReleasesElsewhere(t *testing.T) {
	env := envtest.Shared(t)
	ctx := context.Background()
	n := &node{store: MustStart(t, env, "node-cool-gc", Options{}, nil)}
	c := conf("cool-gc", `,"network_name":"cool-gc","range":"10.144.0.0/24","reuseCooldown":"1h"`)
	if got, err := n.add(c, "IP=10.144.0.1", "x"); err != nil || got[0].String() != "10.144.0.1" {
		t.Fatalf("ADD asking for 10.144.0.1 = %v, %v", got, err)
	}
	r := &ipamv1.OverlappingRangeIPReservation{}
	r.Name = ipamv1.ReservationName("cool-gc", netip.MustParseAddr("10.144.0.1"))
	if err := env.Client.Delete(ctx, r); err != nil {
		t.Fatalf("deleting %s as the controller would: %v", r.Name, err)
	}
	st := n.store.poolStateFor("cool-gc-10.144.0.0-24")
	poll.Eventually(t, 10*time.Second, "the agent cools the address released elsewhere", func() error {
		if err := lockPool(ctx, st); err != nil {
			return err
		}
		defer unlockPool(st)
		if !st.cooling.has(netip.MustParseAddr("10.144.0.1")) {
			return errors.New("10.144.0.1 is not cooling")
		}
		return nil
	})
	if got := n.mustAdd(t, c, "y"); got.String() == "10.144.0.1" {
		t.Errorf("the next ADD got 10.144.0.1, released elsewhere a moment ago")
	}
}
