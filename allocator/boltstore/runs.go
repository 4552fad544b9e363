package boltstore

import (
	"bytes"
	"net/netip"

	bolt "go.etcd.io/bbolt"

	"github.com/netpool/netpool/ipam"
)

// runs is a set of addresses stored as maximal runs of consecutive addresses: key = first address
// of a run, value = its last. Runs never overlap or touch, so every operation is one or two cursor
// seeks.
type runs struct{ b *bolt.Bucket }

func key(a netip.Addr) []byte {
	k := ipam.AddrKey(a)
	return k[:]
}

func addr(k []byte) netip.Addr {
	a, _ := ipam.AddrFromKey(k)
	return a
}

// containing returns the run that holds a, if any.
func (r runs) containing(a netip.Addr) (first, last netip.Addr, ok bool) {
	ka := key(a)
	c := r.b.Cursor()
	k, v := c.Seek(ka)
	if k != nil && bytes.Equal(k, ka) {
		if len(v) != len(ka) || bytes.Compare(v, ka) < 0 {
			// A run that ends before it starts exists only in a damaged file; taking its end
			// would send the free search backwards, round and round for ever.
			return a, a, true
		}
		return a, addr(v), true
	}
	// Seek landed past a (or at the end): the only candidate is the run before.
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	if k == nil || bytes.Compare(v, ka) < 0 {
		return netip.Addr{}, netip.Addr{}, false
	}
	return addr(k), addr(v), true
}

// add inserts a, which must not be in the set, merging with the runs that end just before it and
// start just after it.
func (r runs) add(a netip.Addr) error {
	first, last := a, a
	if prev := a.Prev(); prev.IsValid() && prev.BitLen() == a.BitLen() {
		if f, _, ok := r.containing(prev); ok {
			first = f
		}
	}
	if next := a.Next(); next.IsValid() {
		if v := r.b.Get(key(next)); v != nil {
			last = addr(v)
			if err := r.b.Delete(key(next)); err != nil {
				return err
			}
		}
	}
	return r.b.Put(key(first), key(last))
}

// remove deletes a, which must be in the set, splitting its run.
func (r runs) remove(a netip.Addr) error {
	first, last, ok := r.containing(a)
	if !ok {
		return nil
	}
	if err := r.b.Delete(key(first)); err != nil {
		return err
	}
	if first != a {
		if err := r.b.Put(key(first), key(a.Prev())); err != nil {
			return err
		}
	}
	if last != a {
		return r.b.Put(key(a.Next()), key(last))
	}
	return nil
}
