package boltstore

import (
	"context"
	"fmt"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/ipam"
)

// Sticky addresses by pod name: with statefulSets: Sticky in the config, an attachment whose pod
// name (K8S_POD_NAME) ends in -<ordinal> belongs to the persistent owner
// "PodName/<namespace>/<name>/<ifName>", since a host-only runtime has StatefulSet-like names but
// no StatefulSet to ask. The engine's rule (allocator/persistent.go) then applies:
//
//   - pools/<pool>/persistent maps the owner to its address, and the address's record names the
//     owner (record.Persistent) and the attachment bound last, whose owners entry stays;
//   - ADD of another attachment with the same pod name re-binds: the record and the owners index
//     move to it;
//   - DEL and GC (the runtime's valid list) unbind, which changes nothing stored: the address
//     stays held under the last attachment, so the same pod name gets it back;
//   - nothing releases it but an operator: `netpoolctl --db PATH release --force` (there is no
//     StatefulSet to scale or delete here), which deletes the persistent entry with the address.

var bucketPersistent = []byte("persistent")

// stickyOwnerKind is the kind of an embedded store's sticky owner key.
const stickyOwnerKind = "PodName"

var _ allocator.PersistentTxn = (*txn)(nil)

// PersistentOwner is the pod-name owner of the attachment when c is sticky and its pod's name ends
// in -<ordinal>; "" otherwise.
func (t *txn) PersistentOwner(_ context.Context, c *ipam.Config, owner allocator.Owner) (string, error) {
	if !c.Sticky() || c.Pod.Name == "" {
		return "", nil
	}
	if _, _, ok := ipam.OrdinalName(c.Pod.Name); !ok {
		return "", nil
	}
	return stickyOwnerKind + "/" + c.Pod.Namespace + "/" + c.Pod.Name + "/" + owner.IfName, nil
}

// Rebind moves the address persistent owner a.Persistent holds in pool p to a.Owner. With a
// requested a.Addr another than the owner's, the owner's address is released instead and false
// returned, so that the engine claims the request for the owner.
func (t *txn) Rebind(ctx context.Context, p allocator.Pool, a *allocator.Allocation) (bool, error) {
	pb, err := t.pool(p.Key)
	if err != nil {
		return false, err
	}
	held, ok, err := t.persistentHeld(pb, p.Key, a.Persistent)
	if err != nil || !ok {
		return false, err
	}
	if a.Addr.IsValid() && a.Addr != held.Addr {
		return false, t.releaseAt(pb, p, held)
	}
	if held.Owner != a.Owner {
		if err := t.tx.Bucket(bucketOwners).Delete(ownerKey(p.Key, held.Owner)); err != nil {
			return false, err
		}
	}
	moved := *a
	moved.Addr, moved.Created, moved.Scope = held.Addr, held.Created, held.Scope
	v, err := encodeRecord(&moved)
	if err != nil {
		return false, err
	}
	if err := pb.alloc.Put(key(moved.Addr), v); err != nil {
		return false, err
	}
	if err := t.tx.Bucket(bucketOwners).Put(ownerKey(p.Key, a.Owner), key(moved.Addr)); err != nil {
		return false, err
	}
	*a = moved
	return true, nil
}

// persistentHeld returns the allocation persistent owner key holds in the pool. An entry whose
// address holds another owner's record (or none) is not the owner's: it is dropped (in a
// read-write transaction) and reported as nothing held.
func (t *txn) persistentHeld(pb poolBuckets, pool, owner string) (allocator.Allocation, bool, error) {
	pe := pb.root.Bucket(bucketPersistent)
	if pe == nil {
		return allocator.Allocation{}, false, nil
	}
	k := pe.Get([]byte(owner))
	if k == nil {
		return allocator.Allocation{}, false, nil
	}
	if v := pb.alloc.Get(k); v != nil {
		al, err := decodeRecord(pool, k, v)
		if err != nil {
			return allocator.Allocation{}, false, err
		}
		if al.Persistent == owner {
			return al, true, nil
		}
	}
	if !t.tx.Writable() {
		return allocator.Allocation{}, false, nil
	}
	return allocator.Allocation{}, false, pe.Delete([]byte(owner))
}

// Unbind leaves a persistently owned address as it is: it stays held under the attachment bound
// last (see above). It reports false for an address the attachment owns itself.
func (t *txn) Unbind(ctx context.Context, pool string, owner allocator.Owner) (allocator.Allocation, bool, error) {
	al, ok, err := t.Get(ctx, pool, owner)
	if err != nil || !ok || al.Persistent == "" {
		return allocator.Allocation{}, false, err
	}
	return al, true, nil
}

// putPersistent records a claimed address of a persistent owner.
func putPersistent(pb poolBuckets, a *allocator.Allocation) error {
	if a.Persistent == "" {
		return nil
	}
	pe, err := pb.root.CreateBucketIfNotExists(bucketPersistent)
	if err != nil {
		return err
	}
	if err := pe.Put([]byte(a.Persistent), key(a.Addr)); err != nil {
		return fmt.Errorf("record the persistent owner of %s: %w", a.Addr, err)
	}
	return nil
}

// dropPersistent forgets the persistent owner of a released address.
func dropPersistent(pb poolBuckets, al allocator.Allocation) error {
	if al.Persistent == "" {
		return nil
	}
	pe := pb.root.Bucket(bucketPersistent)
	if pe == nil {
		return nil
	}
	if k := pe.Get([]byte(al.Persistent)); k != nil && addr(k) == al.Addr {
		return pe.Delete([]byte(al.Persistent))
	}
	return nil
}
