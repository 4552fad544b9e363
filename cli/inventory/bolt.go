package inventory

import (
	"context"
	"net/netip"
	"strings"
	"time"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/allocator/boltstore"
	"github.com/netpool/netpool/internal/ippool"
)

// Bolt reads an embedded store (a bbolt file).
type Bolt struct{ Store *boltstore.Store }

var _ Source = (*Bolt)(nil)

// Kind is "bbolt".
func (b *Bolt) Kind() string { return "bbolt" }

// Close closes the store and releases its file lock.
func (b *Bolt) Close() error { return b.Store.Close() }

// Pools lists the file's pools with the range the store recorded for each, parsed by the one pool
// model: the range is written as the IPPool it would derive (ippool.Derive) and parsed back.
func (b *Bolt) Pools(context.Context) ([]Pool, error) {
	infos, err := b.Store.Pools()
	if err != nil {
		return nil, err
	}
	out := make([]Pool, 0, len(infos))
	for _, info := range infos {
		p := Pool{Name: info.Key, Network: networkOf(info.Key), Used: int64(info.Allocated), Created: info.Created}
		p.Subnet, _ = netip.ParsePrefix(strings.TrimPrefix(info.Key, p.Network+"/"))
		switch obj, err := ippool.Derive(p.Network, info.Range, ippool.Rules{Overlapping: true}); {
		case info.RangeErr != nil:
			p.RangeErr = info.RangeErr.Error()
		case err != nil:
			p.RangeErr = err.Error()
		default:
			obj.Name = info.Key
			if p.Model, err = ippool.Parse(obj); err != nil {
				p.RangeErr = err.Error()
			} else {
				p.Subnet = p.Model.Range.Subnet
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// networkOf is the network name in pool key ipam.PoolKey: what comes before the subnet's
// address, which is the key's last two '/'-separated parts.
func networkOf(key string) string {
	i := strings.LastIndex(key, "/")
	if i < 0 {
		return ""
	}
	j := strings.LastIndex(key[:i], "/")
	if j < 0 {
		return ""
	}
	return key[:j]
}

// Allocations lists the allocations of pool, or of every pool, from one read-only transaction.
func (b *Bolt) Allocations(ctx context.Context, pool string) ([]Allocation, error) {
	keys := []string{pool}
	if pool == "" {
		infos, err := b.Store.Pools()
		if err != nil {
			return nil, err
		}
		keys = keys[:0]
		for _, info := range infos {
			keys = append(keys, info.Key)
		}
	}
	var out []Allocation
	err := b.Store.View(ctx, func(ctx context.Context, tx allocator.Txn) error {
		out = out[:0]
		for _, key := range keys {
			if err := tx.ForEach(ctx, key, func(al allocator.Allocation) error {
				out = append(out, Allocation{
					Pool: al.Pool, Address: al.Addr, Namespace: al.Pod.Namespace, PodName: al.Pod.Name, PodUID: al.Pod.UID,
					ContainerID: al.Owner.ContainerID, Interface: al.Owner.IfName, Network: al.Network,
					Created: al.Created, ref: al,
				})
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	sortAllocations(out)
	return out, err
}

// Slices fails: one host allocates from the whole range.
func (b *Bolt) Slices(context.Context, string) ([]Slice, error) { return nil, ErrNoSlices }

// embeddedAlive is why every embedded allocation counts as alive.
const embeddedAlive = "an embedded store has no pod API to ask: netpoolctl cannot tell a leaked address from a live one " +
	"(the runtime's CNI GC releases what it no longer runs)"

// Alive is always true: the host's runtime, not the file, knows which containers run, so a
// release from an embedded store always needs --force.
func (b *Bolt) Alive(context.Context, Allocation) (bool, string, error) {
	return true, embeddedAlive, nil
}

// Release releases a in one read-write transaction of the store, only if the same attachment
// still holds the same address with the same claim time: a DEL and a new ADD of the attachment
// since the listing leave the new claim alone.
func (b *Bolt) Release(ctx context.Context, a Allocation) (bool, error) {
	want := a.ref.(allocator.Allocation)
	released := false
	err := b.Store.Update(ctx, func(ctx context.Context, tx allocator.Txn) error {
		released = false
		got, ok, err := tx.Get(ctx, want.Pool, want.Owner)
		if err != nil || !ok || got.Addr != want.Addr || !got.Created.Equal(want.Created) {
			return err
		}
		// The file does not record the configs' reuseCooldown, so an operator's release frees the
		// address at once; the blocked runs of a pool that had a cool-down stay true either way.
		_, released, err = tx.Release(ctx, allocator.Pool{Key: want.Pool, Now: time.Now()}, want.Owner)
		return err
	})
	return released, err
}
