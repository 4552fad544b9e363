package allocator

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/netpool/netpool/ipam"
)

// Allocator applies netpool's allocation rules over a Store.
type Allocator struct {
	store Store
	now   func() time.Time
}

// New returns an Allocator over store.
func New(store Store) *Allocator {
	return &Allocator{store: store, now: time.Now}
}

// Pools returns the pools of a config, one per range, in range order.
func Pools(c *ipam.Config) []Pool {
	pools := make([]Pool, len(c.Ranges))
	for i, r := range c.Ranges {
		pools[i] = Pool{Key: c.PoolKey(i), Range: r, Cooldown: c.ReuseCooldown}
		if c.EnableOverlappingRanges {
			pools[i].Scope = OverlapScope(c.NetworkName)
		}
	}
	return pools
}

// Add returns one allocation per range for owner, claiming what it does not hold yet. Calling it
// again for the same owner returns the same addresses.
func (a *Allocator) Add(ctx context.Context, c *ipam.Config, owner Owner) ([]Allocation, error) {
	pools := a.pools(c)
	out := make([]Allocation, len(pools))
	err := a.store.Update(ctx, func(ctx context.Context, tx Txn) error {
		persistent, err := persistentOwner(ctx, tx, c, owner)
		if err != nil {
			return err
		}
		for i, p := range pools {
			requested := requestedIn(c, i)
			got, held, err := tx.Get(ctx, p.Key, owner)
			if err != nil {
				return err
			}
			if held {
				if requested.IsValid() && got.Addr != requested {
					return fmt.Errorf("%w: %s/%s holds %s in pool %s, not the requested %s",
						ErrAttachmentConflict, owner.ContainerID, owner.IfName, got.Addr, p.Key, requested)
				}
				out[i] = got
				continue
			}
			al := Allocation{
				Pool: p.Key, Owner: owner, Network: c.Name, Pod: c.Pod,
				Scope: p.Scope, Created: a.now().UTC(), Persistent: persistent,
			}
			if persistent != "" {
				al.Addr = requested // a requested address wins over the owner's, and becomes it
				bound, err := tx.(PersistentTxn).Rebind(ctx, p, &al)
				if err != nil {
					return err
				}
				if bound {
					out[i] = al
					continue
				}
			}
			if requested.IsValid() {
				if err := p.Range.Allowed(requested); err != nil {
					return fmt.Errorf("%w: requested %w", ErrAddressNotAllowed, err)
				}
				al.Addr = requested
				err = tx.Claim(ctx, p, &al)
			} else {
				err = tx.ClaimNext(ctx, p, &al)
			}
			if err != nil {
				return err
			}
			out[i] = al
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// persistentOwner asks the store for owner's persistent owner; a store that keeps none has none.
func persistentOwner(ctx context.Context, tx Txn, c *ipam.Config, owner Owner) (string, error) {
	pt, ok := tx.(PersistentTxn)
	if !ok {
		return "", nil
	}
	return pt.PersistentOwner(ctx, c, owner)
}

func requestedIn(c *ipam.Config, i int) netip.Addr {
	for _, r := range c.Requested {
		if c.RangeFor(r) == i {
			return r
		}
	}
	return netip.Addr{}
}

// Del releases owner's addresses in every range of the config. Releasing what is not held is not
// an error, so DEL can be repeated.
func (a *Allocator) Del(ctx context.Context, c *ipam.Config, owner Owner) ([]Allocation, error) {
	return a.release(ctx, c, func(context.Context, Txn, Pool) ([]Owner, error) {
		return []Owner{owner}, nil
	})
}

// release releases, in one Update, the owners that pick names in each pool of the config, and
// returns what was released. An owner that holds nothing is skipped; one bound to a persistently
// owned address is unbound, and the address stays held. The list restarts when the store runs fn
// again, so it names only what the last run released.
func (a *Allocator) release(ctx context.Context, c *ipam.Config, pick func(context.Context, Txn, Pool) ([]Owner, error)) ([]Allocation, error) {
	var released []Allocation
	err := a.store.Update(ctx, func(ctx context.Context, tx Txn) error {
		released = released[:0]
		for _, p := range a.pools(c) {
			owners, err := pick(ctx, tx, p)
			if err != nil {
				return err
			}
			for _, o := range owners {
				if pt, ok := tx.(PersistentTxn); ok {
					_, unbound, err := pt.Unbind(ctx, p.Key, o)
					if err != nil {
						return err
					}
					if unbound {
						continue
					}
				}
				al, ok, err := tx.Release(ctx, p, o)
				if err != nil {
					return err
				}
				if ok {
					released = append(released, al)
				}
			}
		}
		return nil
	})
	return released, err
}

// Check verifies that owner holds exactly the addresses the runtime believes it has.
func (a *Allocator) Check(ctx context.Context, c *ipam.Config, owner Owner, have []netip.Addr) error {
	return a.store.View(ctx, func(ctx context.Context, tx Txn) error {
		var errs []error
		held := map[netip.Addr]bool{}
		for _, p := range Pools(c) {
			al, ok, err := tx.Get(ctx, p.Key, owner)
			if err != nil {
				return err
			}
			if !ok {
				errs = append(errs, fmt.Errorf("%w: %s/%s holds no address in pool %s",
					ErrCheckFailed, owner.ContainerID, owner.IfName, p.Key))
				continue
			}
			held[al.Addr] = true
		}
		for _, h := range have {
			if c.RangeFor(h) >= 0 && !held[h] {
				errs = append(errs, fmt.Errorf("%w: %s is in the result of %s/%s but not allocated to it",
					ErrCheckFailed, h, owner.ContainerID, owner.IfName))
			}
		}
		return errors.Join(errs...)
	})
}

// GC releases every allocation of this network (c.Name) in the config's pools whose owner is not
// among valid. Allocations made by other networks sharing a pool are never touched.
func (a *Allocator) GC(ctx context.Context, c *ipam.Config, valid []Owner) ([]Allocation, error) {
	keep := make(map[Owner]bool, len(valid))
	for _, o := range valid {
		keep[o] = true
	}
	return a.release(ctx, c, func(ctx context.Context, tx Txn, p Pool) ([]Owner, error) {
		var stale []Owner
		err := tx.ForEach(ctx, p.Key, func(al Allocation) error {
			if al.Network == c.Name && !keep[al.Owner] {
				stale = append(stale, al.Owner)
			}
			return nil
		})
		return stale, err
	})
}

// Status returns nil when an ADD could succeed, or ErrPoolExhausted naming the first range with
// nothing left: ADD takes one address from every range, so one exhausted range stops them all.
func (a *Allocator) Status(ctx context.Context, c *ipam.Config) error {
	return a.store.View(ctx, func(ctx context.Context, tx Txn) error {
		for _, p := range a.pools(c) {
			free, err := tx.HasFree(ctx, p)
			if err != nil {
				return err
			}
			if !free {
				return fmt.Errorf("%w: no free address in pool %s (window %s-%s)",
					ErrPoolExhausted, p.Key, p.Range.Start, p.Range.End)
			}
		}
		return nil
	})
}
