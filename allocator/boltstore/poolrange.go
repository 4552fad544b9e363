package boltstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/ipam"
)

// Keys of a pool's meta bucket that describe the pool for tools that read the file (netpoolctl
// --db), which have no config to learn the range from.
var (
	// keyRange holds the canonical text of the range of the last config that claimed in the pool
	// (rangeRecord as JSON).
	keyRange = []byte("range")
	// keyCreated holds the time of the pool's first recorded claim (RFC 3339).
	keyCreated = []byte("created")
)

// rangeRecord is the stored form of a range: the window and the exclusions written out in full,
// in canonical form, so that the same range always gives the same bytes and ParseRange gives the
// range back.
type rangeRecord struct {
	ipam.RangeSpec
	Gateway string `json:"gateway,omitempty"`
}

func encodeRange(r ipam.Range) ([]byte, error) {
	rec := rangeRecord{RangeSpec: ipam.RangeSpec{
		Range: r.Subnet.String(), RangeStart: r.Start.String(), RangeEnd: r.End.String(), Exclude: r.ExcludedCIDRs(),
	}}
	if r.Gateway.IsValid() {
		rec.Gateway = r.Gateway.String()
	}
	return json.Marshal(rec)
}

func decodeRange(v []byte) (ipam.Range, error) {
	var rec rangeRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return ipam.Range{}, err
	}
	var gw netip.Addr
	if rec.Gateway != "" {
		var err error
		if gw, err = netip.ParseAddr(rec.Gateway); err != nil {
			return ipam.Range{}, fmt.Errorf("gateway %q: %w", rec.Gateway, err)
		}
	}
	return ipam.ParseRange("range", rec.RangeSpec, gw)
}

// recordPool writes, in the claim's own transaction, the range of the claiming config and the
// pool's creation time, each only when it is missing or different: a claim by the usual config
// compares a few bytes and writes nothing more, so the hot path gains no page and no fsync.
func recordPool(mb *bolt.Bucket, r ipam.Range, created time.Time) error {
	text, err := encodeRange(r)
	if err != nil {
		return err
	}
	if !bytes.Equal(mb.Get(keyRange), text) {
		if err := mb.Put(keyRange, text); err != nil {
			return err
		}
	}
	if mb.Get(keyCreated) == nil {
		return mb.Put(keyCreated, []byte(created.UTC().Format(time.RFC3339Nano)))
	}
	return nil
}

// PoolInfo is one pool of the file, as Pools lists it.
type PoolInfo struct {
	// Key is the pool's identity, ipam.PoolKey: "network_name/subnet", or the subnet alone.
	Key string
	// Range is the range of the last config that claimed in the pool; RangeErr says why it is
	// unknown (a file written before ranges were recorded, or a record that does not parse).
	Range    ipam.Range
	RangeErr error
	// Created is the time of the pool's first recorded claim; zero when unknown.
	Created time.Time
	// Allocated is the number of addresses the pool holds.
	Allocated int
}

// errRangeUnrecorded is the RangeErr of a pool whose file predates recorded ranges.
var errRangeUnrecorded = fmt.Errorf("no range recorded: the pool has had no claim since netpool began recording ranges")

// Pools lists the pools of the file in key order, in one read-only transaction.
func (s *Store) Pools() ([]PoolInfo, error) {
	var out []PoolInfo
	err := s.guard("read", func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			out = out[:0]
			parent := tx.Bucket(bucketPools)
			if parent == nil {
				return fmt.Errorf("%w: bucket %q is missing", allocator.ErrStoreUnusable, bucketPools)
			}
			return parent.ForEachBucket(func(k []byte) error {
				out = append(out, poolInfo(string(k), parent.Bucket(k)))
				return nil
			})
		})
	})
	return out, err
}

func poolInfo(key string, b *bolt.Bucket) PoolInfo {
	info := PoolInfo{Key: key, RangeErr: errRangeUnrecorded}
	if alloc := b.Bucket(bucketAlloc); alloc != nil {
		info.Allocated = alloc.Stats().KeyN
	}
	mb := b.Bucket(bucketMeta)
	if mb == nil {
		return info
	}
	if v := mb.Get(keyRange); v != nil {
		info.Range, info.RangeErr = decodeRange(v)
		if info.RangeErr != nil {
			info.RangeErr = fmt.Errorf("the recorded range %s does not parse: %w", v, info.RangeErr)
		}
	}
	if v := mb.Get(keyCreated); v != nil {
		if t, err := time.Parse(time.RFC3339Nano, string(v)); err == nil {
			info.Created = t
		}
	}
	return info
}
