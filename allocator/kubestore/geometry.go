package kubestore

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// maxSliceIndexBits caps the number of blocks of a pool at 2^63, so a block index fits SliceName's
// uint64 with room to spare.
const maxSliceIndexBits = 63

// geometry carves a pool's range into aligned blocks of equal size: block i is the i-th prefix of
// length bits inside subnet.
type geometry struct {
	subnet netip.Prefix
	bits   int
}

// newGeometry returns the block layout of subnet for an IPPool's sliceSize (0: the default).
func newGeometry(subnet netip.Prefix, sliceSize int32) (geometry, error) {
	bitLen := subnet.Addr().BitLen()
	g := geometry{subnet: subnet, bits: int(sliceSize)}
	if sliceSize == 0 {
		g.bits = defaultSliceBits(subnet)
	}
	if g.bits < subnet.Bits() || g.bits > bitLen {
		return g, fmt.Errorf("sliceSize %d does not fit range %s (want %d to %d)", sliceSize, subnet, subnet.Bits(), bitLen)
	}
	if g.bits-subnet.Bits() > maxSliceIndexBits {
		return g, fmt.Errorf("sliceSize %d carves range %s into more than 2^%d slices (want at most %d)",
			sliceSize, subnet, maxSliceIndexBits, subnet.Bits()+maxSliceIndexBits)
	}
	return g, nil
}

// minSliceAddrBits is the smallest default block: 16 addresses. A block costs an IPPoolSlice Create
// (and the API server's dispatch of its event to every agent's watch of slices); below 16
// addresses that costs more than the contention it saves (a /28 pool would be 13 one-address
// slices, one Create per ADD).
const minSliceAddrBits = 4

// defaultSliceBits chooses blocks of 64 addresses, or a sixteenth of the range when that is
// smaller, so that a mid-sized pool still has blocks for several nodes; but never fewer than 16
// addresses a block, so that a range of 16 addresses or fewer is one block (nodes that find it
// claimed borrow from it, which costs a list of at most that many reservations); and never more
// than 2^63 blocks.
func defaultSliceBits(subnet netip.Prefix) int {
	bitLen := subnet.Addr().BitLen()
	b := max(bitLen-6, subnet.Bits()+4)
	b = max(min(b, bitLen-minSliceAddrBits), subnet.Bits())
	return min(b, subnet.Bits()+maxSliceIndexBits)
}

// index is the number of the block holding a, which must lie in the subnet.
func (g geometry) index(a netip.Addr) uint64 {
	hi, lo := toU128(a)
	_, lo = shr128(hi, lo, uint(a.BitLen()-g.bits))
	width := uint(g.bits - g.subnet.Bits())
	if width == 64 {
		return lo
	}
	return lo & (1<<width - 1)
}

// block returns block i as a prefix.
func (g geometry) block(i uint64) netip.Prefix {
	bitLen := g.subnet.Addr().BitLen()
	hi, lo := toU128(g.subnet.Addr())
	ihi, ilo := shl128(0, i, uint(bitLen-g.bits))
	return netip.PrefixFrom(fromU128(g.subnet.Addr().Is4(), hi|ihi, lo|ilo), g.bits)
}

func toU128(a netip.Addr) (uint64, uint64) {
	if a.Is4() {
		b := a.As4()
		return 0, uint64(binary.BigEndian.Uint32(b[:]))
	}
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

func fromU128(is4 bool, hi, lo uint64) netip.Addr {
	if is4 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(lo))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return netip.AddrFrom16(b)
}

func shr128(hi, lo uint64, s uint) (uint64, uint64) {
	switch {
	case s == 0:
		return hi, lo
	case s >= 128:
		return 0, 0
	case s >= 64:
		return 0, hi >> (s - 64)
	}
	return hi >> s, lo>>s | hi<<(64-s)
}

func shl128(hi, lo uint64, s uint) (uint64, uint64) {
	switch {
	case s == 0:
		return hi, lo
	case s >= 128:
		return 0, 0
	case s >= 64:
		return lo << (s - 64), 0
	}
	return hi<<s | lo>>(64-s), lo << s
}
