package allocator

import (
	"time"

	"github.com/netpool/netpool/ipam"
)

// The reuse cool-down (ipam reuseCooldown, IPPool spec.reuseCooldown): an address released less
// than Pool.Cooldown before Pool.Now is not handed out by ClaimNext while any other address of
// the range is free, so ARP caches, conntrack entries and firewall rules keyed on its last owner
// have time to expire. The rules every store keeps (allocator/storetest checks them):
//
//   - When only cooling addresses remain, ClaimNext hands out the one released longest ago rather
//     than fail: a pool is exhausted at its capacity, as without a cool-down, and the oldest
//     release is the one whose traces are most likely gone.
//   - Claim of a requested address is not held back: an explicit request wins. The address stops
//     cooling once claimed.
//   - A pool without a cool-down behaves exactly as before: round-robin, nothing recorded.
//
// Times come from the engine's clock (WithClock), not the store's, so tests move time without
// sleeping and both stores measure against the same instant.

// WithClock makes a use now as its clock, for the cool-down and for Allocation.Created. It returns a.
func (a *Allocator) WithClock(now func() time.Time) *Allocator {
	a.now = now
	return a
}

// pools is Pools stamped with the engine's clock, which the cool-down is measured against.
func (a *Allocator) pools(c *ipam.Config) []Pool {
	ps := Pools(c)
	now := a.now().UTC()
	for i := range ps {
		ps[i].Now = now
	}
	return ps
}
