package boltstore

import (
	"fmt"
	"net/netip"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/netpool/netpool/allocator"
)

// Released is an address a pool released under a cool-down, and when.
type Released struct {
	Addr netip.Addr
	At   time.Time
}

// Released lists the addresses pool released under its cool-down that the store still tracks, in
// address order, from one read-only transaction: what netpoolctl shows as cooling. The file does
// not record the configs' reuseCooldown, so an entry may be past its cool-down; the next claim
// in the pool prunes those. A pool that never had a cool-down has none.
func (s *Store) Released(pool string) ([]Released, error) {
	var out []Released
	err := s.guard("read", func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			out = out[:0]
			parent := tx.Bucket(bucketPools)
			if parent == nil {
				return fmt.Errorf("%w: bucket %q is missing", allocator.ErrStoreUnusable, bucketPools)
			}
			pb := parent.Bucket([]byte(pool))
			if pb == nil {
				return nil
			}
			byAddr := pb.Bucket(bucketCooled)
			if byAddr == nil {
				return nil
			}
			return byAddr.ForEach(func(k, v []byte) error {
				a := addr(k)
				if !a.IsValid() || len(v) != 8 {
					return fmt.Errorf("%w: pool %s has a cooling entry of %d+%d bytes", allocator.ErrStoreUnusable, pool, len(k), len(v))
				}
				out = append(out, Released{Addr: a, At: unstamp(v)})
				return nil
			})
		})
	})
	return out, err
}
