package boltstore

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/netpool/netpool/allocator"
)

// The reuse cool-down in the embedded store (allocator/cooldown.go states the rule). A pool that
// has released an address under a cool-down has three more buckets:
//
//	pools/<pool>/blocked   runs of addresses held or cooling: what the free search skips
//	pools/<pool>/cooling   release time (8 bytes, ordered) + address -> empty, oldest first
//	pools/<pool>/cooled    address -> its release time (8 bytes)
//
// They are written in the transaction of the release, and each ClaimNext of the pool first prunes
// the entries that have expired. Every release is pruned once, so ClaimNext stays O(log n) in the
// allocations and free of the range's size: its search is the same few seeks over blocked as over
// used. blocked starts, at a pool's first release under a cool-down, as a copy of used (once per
// pool, O(runs)); from then on every claim and release of the pool keeps it, whatever the config's
// cool-down, so it never goes stale. A pool that never had a cool-down has none of these buckets,
// writes nothing more and reads one bucket lookup more per call.
//
// The cool-down is the pool's: an overlap scope forgets the address at release as before, so
// another pool of the same network may hand it out at once.
var (
	bucketBlocked = []byte("blocked")
	bucketCooling = []byte("cooling")
	bucketCooled  = []byte("cooled")
)

// cooling is a pool's cool-down buckets; all nil when the pool never had a cool-down.
type cooling struct{ blocked, byTime, byAddr *bolt.Bucket }

func (c cooling) tracked() bool { return c.blocked != nil }

// openCooling returns the pool's cool-down buckets, making them when create is set. A pool
// without them costs one bucket lookup (an in-memory seek); one that ClaimNext opened already
// (pb.cool) costs none.
func openCooling(pb poolBuckets, create bool) (cooling, error) {
	if pb.cool != nil && (pb.cool.tracked() || !create) {
		return *pb.cool, nil
	}
	if pb.root == nil {
		return cooling{}, nil
	}
	c := cooling{blocked: pb.root.Bucket(bucketBlocked)}
	if c.blocked == nil && !create {
		return cooling{}, nil
	}
	c.byTime, c.byAddr = pb.root.Bucket(bucketCooling), pb.root.Bucket(bucketCooled)
	if c.tracked() {
		if c.byTime == nil || c.byAddr == nil {
			return cooling{}, fmt.Errorf("%w: a pool has blocked runs but no cooling index", allocator.ErrStoreUnusable)
		}
		return c, nil
	}
	if !create {
		return cooling{}, nil
	}
	var err error
	for _, nb := range []struct {
		name []byte
		dst  **bolt.Bucket
	}{{bucketBlocked, &c.blocked}, {bucketCooling, &c.byTime}, {bucketCooled, &c.byAddr}} {
		if *nb.dst, err = pb.root.CreateBucketIfNotExists(nb.name); err != nil {
			return cooling{}, err
		}
	}
	err = pb.used.ForEach(func(k, v []byte) error {
		return c.blocked.Put(append([]byte(nil), k...), append([]byte(nil), v...))
	})
	return c, err
}

// stamp encodes t so that byte order is time order, before 1970 included.
func stamp(t time.Time) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(t.UnixNano())^(1<<63))
	return b[:]
}

func unstamp(b []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(b)^(1<<63)))
}

// prune ends the cool-down of every address released at or before cutoff, oldest first.
func (c cooling) prune(cutoff time.Time) error {
	for {
		k, _ := c.byTime.Cursor().First()
		if k == nil {
			return nil
		}
		if len(k) != 8+16 {
			return fmt.Errorf("%w: a cooling entry has a %d-byte key", allocator.ErrStoreUnusable, len(k))
		}
		if unstamp(k[:8]).After(cutoff) {
			return nil
		}
		a := addr(k[8:])
		k = append([]byte(nil), k...)
		if err := c.byTime.Delete(k); err != nil {
			return err
		}
		if err := c.byAddr.Delete(k[8:]); err != nil {
			return err
		}
		if err := (runs{c.blocked}).remove(a); err != nil {
			return err
		}
	}
}

// oldest returns the cooling address released longest ago that p's range allows and the overlap
// scope does not hold: what ClaimNext hands out when only cooling addresses are free. It walks the
// cooling entries in release order, so it costs what the pool has cooling outside the window.
func (c cooling) oldest(p allocator.Pool, scope *bolt.Bucket) (netip.Addr, bool) {
	cur := c.byTime.Cursor()
	for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
		if len(k) != 8+16 {
			continue
		}
		a := addr(k[8:])
		if !a.IsValid() || p.Range.Allowed(a) != nil {
			continue
		}
		if scope != nil {
			if _, _, held := (runs{scope}).containing(a); held {
				continue
			}
		}
		return a, true
	}
	return netip.Addr{}, false
}

// releasedCooling is Release's part: under a cool-down a cools from p.Now and stays blocked;
// without one, a pool that keeps blocked runs unblocks it. a is still in used.
func releasedCooling(pb poolBuckets, p allocator.Pool, a netip.Addr) error {
	c, err := openCooling(pb, p.Cooldown > 0)
	if err != nil || !c.tracked() {
		return err
	}
	if p.Cooldown <= 0 {
		return (runs{c.blocked}).remove(a)
	}
	t := stamp(p.Now)
	if err := c.byTime.Put(append(t, key(a)...), nil); err != nil {
		return err
	}
	return c.byAddr.Put(key(a), t)
}

// claimedCooling is the claim's part: a claimed cooling address stops cooling (it is blocked
// already), any other claimed address becomes blocked.
func claimedCooling(pb poolBuckets, a netip.Addr) error {
	c, err := openCooling(pb, false)
	if err != nil || !c.tracked() {
		return err
	}
	t := c.byAddr.Get(key(a))
	if t == nil {
		return (runs{c.blocked}).add(a)
	}
	if err := c.byTime.Delete(append(append([]byte(nil), t...), key(a)...)); err != nil {
		return err
	}
	return c.byAddr.Delete(key(a))
}
