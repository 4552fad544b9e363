package boltstore

import (
	"context"
	"fmt"
	"net/netip"

	bolt "go.etcd.io/bbolt"

	"github.com/netpool/netpool/allocator"
)

// txn is one bbolt transaction. Its methods ignore their context: a bbolt transaction does no I/O
// that could wait (the file lock was taken at Open), so Update checks the context once, up front.
type txn struct{ tx *bolt.Tx }

var _ allocator.Txn = (*txn)(nil)

// poolBuckets are the buckets of one pool; nil fields mean the pool has never been written to
// (only possible in a read-only transaction).
type poolBuckets struct {
	alloc, used, meta *bolt.Bucket
	// root is the pool's own bucket, parent of the above and of the cool-down's (cooling.go).
	root *bolt.Bucket
	// cool, once set, is the pool's cool-down buckets as this txn method opened them.
	cool *cooling
}

func (t *txn) pool(key string) (poolBuckets, error) {
	parent := t.tx.Bucket(bucketPools)
	if parent == nil {
		return poolBuckets{}, fmt.Errorf("%w: bucket %q is missing", allocator.ErrStoreUnusable, bucketPools)
	}
	b := parent.Bucket([]byte(key))
	if b == nil {
		if !t.tx.Writable() {
			return poolBuckets{}, nil
		}
		var err error
		if b, err = parent.CreateBucket([]byte(key)); err != nil {
			return poolBuckets{}, err
		}
	}
	pb := poolBuckets{root: b}
	for _, nb := range []struct {
		name []byte
		dst  **bolt.Bucket
	}{{bucketAlloc, &pb.alloc}, {bucketUsed, &pb.used}, {bucketMeta, &pb.meta}} {
		*nb.dst = b.Bucket(nb.name)
		if *nb.dst == nil && t.tx.Writable() {
			var err error
			if *nb.dst, err = b.CreateBucket(nb.name); err != nil {
				return poolBuckets{}, err
			}
		}
	}
	return pb, nil
}

// scope returns the allocated runs of an overlap scope; nil when there is none yet (read-only).
func (t *txn) scope(name string) (*bolt.Bucket, error) {
	if name == "" {
		return nil, nil
	}
	parent := t.tx.Bucket(bucketScopes)
	if parent == nil {
		return nil, fmt.Errorf("%w: bucket %q is missing", allocator.ErrStoreUnusable, bucketScopes)
	}
	b := parent.Bucket([]byte(name))
	if b == nil && t.tx.Writable() {
		var err error
		if b, err = parent.CreateBucket([]byte(name)); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (t *txn) Get(_ context.Context, pool string, owner allocator.Owner) (allocator.Allocation, bool, error) {
	k := t.tx.Bucket(bucketOwners).Get(ownerKey(pool, owner))
	if k == nil {
		return allocator.Allocation{}, false, nil
	}
	pb, err := t.pool(pool)
	if err != nil {
		return allocator.Allocation{}, false, err
	}
	if pb.alloc == nil {
		return allocator.Allocation{}, false, fmt.Errorf("%w: owner index points into missing pool %s", allocator.ErrStoreUnusable, pool)
	}
	v := pb.alloc.Get(k)
	if v == nil {
		return allocator.Allocation{}, false, fmt.Errorf("%w: owner index points at %s, which pool %s does not hold", allocator.ErrStoreUnusable, addr(k), pool)
	}
	al, err := decodeRecord(pool, k, v)
	return al, err == nil, err
}

func (t *txn) Claim(_ context.Context, p allocator.Pool, a *allocator.Allocation) error {
	pb, err := t.pool(p.Key)
	if err != nil {
		return err
	}
	if v := pb.alloc.Get(key(a.Addr)); v != nil {
		holder, err := decodeRecord(p.Key, key(a.Addr), v)
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: %s in pool %s is held by %s/%s", allocator.ErrAddressInUse, a.Addr, p.Key,
			holder.Owner.ContainerID, holder.Owner.IfName)
	}
	scope, err := t.scope(p.Scope)
	if err != nil {
		return err
	}
	if scope != nil {
		if _, _, taken := (runs{scope}).containing(a.Addr); taken {
			return fmt.Errorf("%w: %s is held in another pool of overlap scope %q", allocator.ErrAddressInUse, a.Addr, p.Scope)
		}
	}
	if err := recordPool(pb.meta, p.Range, a.Created); err != nil {
		return err
	}
	return t.put(pb, scope, a)
}

func (t *txn) ClaimNext(_ context.Context, p allocator.Pool, a *allocator.Allocation) error {
	pb, err := t.pool(p.Key)
	if err != nil {
		return err
	}
	scope, err := t.scope(p.Scope)
	if err != nil {
		return err
	}
	// In a pool with cooling addresses the search skips the blocked runs (held or cooling)
	// instead of the used ones; the cost is the same few seeks.
	skip := pb.used
	cool, err := openCooling(pb, false)
	if err != nil {
		return err
	}
	pb.cool = &cool
	if cool.tracked() {
		if err := cool.prune(p.Now.Add(-p.Cooldown)); err != nil {
			return err
		}
		if p.Cooldown > 0 {
			skip = cool.blocked
		}
	}
	from := p.Range.Start
	if c := pb.meta.Get(keyCursor); c != nil {
		if last := addr(c); last.IsValid() {
			if next := last.Next(); next.IsValid() {
				from = next
			}
		}
	}
	got, ok := nextFree(p, skip, scope, from, p.Range.End)
	if !ok && from.Compare(p.Range.Start) > 0 {
		got, ok = nextFree(p, skip, scope, p.Range.Start, from.Prev())
	}
	if !ok && skip != pb.used {
		got, ok = cool.oldest(p, scope)
	}
	if !ok {
		return fmt.Errorf("%w: no free address in pool %s (window %s-%s)", allocator.ErrPoolExhausted, p.Key, p.Range.Start, p.Range.End)
	}
	a.Addr = got
	if err := pb.meta.Put(keyCursor, key(got)); err != nil {
		return err
	}
	if err := recordPool(pb.meta, p.Range, a.Created); err != nil {
		return err
	}
	return t.put(pb, scope, a)
}

// nextFree returns the first address in [from, to] that the range allows and that neither the
// pool nor the overlap scope holds. Each turn of the loop jumps past one exclusion or one
// allocated run, so a full pool is crossed in a few seeks, not one per address.
func nextFree(p allocator.Pool, used, scope *bolt.Bucket, from, to netip.Addr) (netip.Addr, bool) {
	a := from
	for {
		var ok bool
		if a, ok = p.Range.NextAllowed(a); !ok || a.Compare(to) > 0 {
			return netip.Addr{}, false
		}
		jumped := false
		for _, b := range []*bolt.Bucket{used, scope} {
			if b == nil {
				continue
			}
			if _, last, held := (runs{b}).containing(a); held {
				if a = last.Next(); !a.IsValid() || a.BitLen() != to.BitLen() {
					return netip.Addr{}, false
				}
				jumped = true
				break
			}
		}
		if !jumped {
			return a, true
		}
	}
}

func (t *txn) put(pb poolBuckets, scope *bolt.Bucket, a *allocator.Allocation) error {
	v, err := encodeRecord(a)
	if err != nil {
		return err
	}
	if err := pb.alloc.Put(key(a.Addr), v); err != nil {
		return err
	}
	if err := (runs{pb.used}).add(a.Addr); err != nil {
		return err
	}
	if err := claimedCooling(pb, a.Addr); err != nil {
		return err
	}
	if scope != nil {
		if err := (runs{scope}).add(a.Addr); err != nil {
			return err
		}
	}
	if err := putPersistent(pb, a); err != nil {
		return err
	}
	return t.tx.Bucket(bucketOwners).Put(ownerKey(a.Pool, a.Owner), key(a.Addr))
}

func (t *txn) Release(ctx context.Context, p allocator.Pool, owner allocator.Owner) (allocator.Allocation, bool, error) {
	pool := p.Key
	al, ok, err := t.Get(ctx, pool, owner)
	if err != nil || !ok {
		return al, false, err
	}
	pb, err := t.pool(pool)
	if err != nil {
		return al, false, err
	}
	return al, true, t.releaseAt(pb, p, al)
}

// releaseAt releases the held allocation al of pool p: its record, runs, cool-down, persistent
// owner and owners entry.
func (t *txn) releaseAt(pb poolBuckets, p allocator.Pool, al allocator.Allocation) error {
	// Before used loses the address: a pool's first cooling address starts its blocked runs
	// as a copy of used.
	if err := releasedCooling(pb, p, al.Addr); err != nil {
		return err
	}
	if err := pb.alloc.Delete(key(al.Addr)); err != nil {
		return err
	}
	if err := (runs{pb.used}).remove(al.Addr); err != nil {
		return err
	}
	if al.Scope != "" {
		scope, err := t.scope(al.Scope)
		if err != nil {
			return err
		}
		if err := (runs{scope}).remove(al.Addr); err != nil {
			return err
		}
	}
	if err := dropPersistent(pb, al); err != nil {
		return err
	}
	return t.tx.Bucket(bucketOwners).Delete(ownerKey(p.Key, al.Owner))
}

func (t *txn) ForEach(_ context.Context, pool string, fn func(allocator.Allocation) error) error {
	pb, err := t.pool(pool)
	if err != nil || pb.alloc == nil {
		return err
	}
	return pb.alloc.ForEach(func(k, v []byte) error {
		al, err := decodeRecord(pool, k, v)
		if err != nil {
			return err
		}
		return fn(al)
	})
}

func (t *txn) HasFree(_ context.Context, p allocator.Pool) (bool, error) {
	pb, err := t.pool(p.Key)
	if err != nil {
		return false, err
	}
	scope, err := t.scope(p.Scope)
	if err != nil {
		return false, err
	}
	_, ok := nextFree(p, pb.used, scope, p.Range.Start, p.Range.End)
	return ok, nil
}
