package boltstore

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"

	"github.com/netpool/netpool/allocator"
)

// The bbolt file format, as far as validateFile reads it (go.etcd.io/bbolt internal/common): every
// page starts with a 16-byte header {id u64, flags u16, count u16, overflow u32}; pages 0 and 1
// are meta pages whose body is {magic u32, version u32, pageSize u32, flags u32, root {pgid u64,
// sequence u64}, freelist u64, pgid u64, txid u64, checksum u64}, the checksum being FNV-64a of
// the body before it. Integers are in the machine's byte order.
const (
	pageHeaderSize   = 16
	metaBodySize     = 64
	metaChecksummed  = 56
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	flagBranch       = 0x01
	flagLeaf         = 0x02
	flagFreelist     = 0x10
	noFreelist       = ^uint64(0)
	minPageSize      = 1 << 10
	maxPageSize      = 1 << 16
	firstDataPage    = 2 // pages 0 and 1 are the meta pages
	minPagesInFile   = 4 // two meta pages, the freelist and the root leaf
	defaultPageSize  = 4096
	maxFreelistBytes = 64 << 20
)

type meta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64 // high water mark: pages [0, pgid) are in use and inside the file
	txid     uint64
}

type pageHeader struct {
	flags    uint16
	count    uint16
	overflow uint32
}

// validateFile checks, before bbolt maps the file, what bbolt would otherwise trust blindly: that
// the meta page it will use is intact, that every page it names lies inside the file, and that the
// page graph it reaches is a tree bbolt can follow without faulting or recursing for ever
// (checkPageGraph). It always walks: it is what netpoolctl check runs.
func validateFile(f *os.File) error {
	_, err := checkFile(f, nil)
	return err
}

// currentMeta reads both meta pages and returns the one bbolt will use, once it is sure the file
// holds every page below that meta page's high-water mark: a file truncated by a full disk, a bad
// copy or a crashed editor would otherwise be mapped past its end, and the first read there is a
// SIGBUS. Two preads, whatever the size of the file.
func currentMeta(f *os.File, size int64) (meta, error) {
	if size < minPagesInFile*minPageSize {
		return meta{}, corrupt("it is %d bytes, smaller than any bbolt database", size)
	}
	m0, err0 := readMeta(f, 0)
	pageSize := int64(defaultPageSize)
	if err0 == nil {
		pageSize = int64(m0.pageSize)
	}
	m1, err1 := readMeta(f, pageSize)
	var m meta
	switch {
	case err0 != nil && err1 != nil:
		return meta{}, corrupt("both meta pages are invalid (%v; %v)", err0, err1)
	case err1 != nil || (err0 == nil && m0.txid >= m1.txid):
		m = m0 // bbolt uses the valid meta page with the higher transaction id
	default:
		m = m1
	}
	ps := uint64(m.pageSize)
	if m.pgid < minPagesInFile || m.pgid > uint64(size)/ps {
		return meta{}, corrupt("it is %d bytes, but its meta page (txid %d) says it holds %d pages of %d bytes: the file is truncated", size, m.txid, m.pgid, ps)
	}
	if m.root < firstDataPage || m.root >= m.pgid {
		return meta{}, corrupt("the root page %d is outside pages %d-%d", m.root, firstDataPage, m.pgid-1)
	}
	if m.freelist != noFreelist && (m.freelist < firstDataPage || m.freelist >= m.pgid) {
		return meta{}, corrupt("the freelist page %d is outside pages %d-%d", m.freelist, firstDataPage, m.pgid-1)
	}
	return m, nil
}

func readMeta(f *os.File, off int64) (meta, error) {
	var b [pageHeaderSize + metaBodySize]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		return meta{}, fmt.Errorf("meta page at offset %d cannot be read: %w", off, err)
	}
	body := b[pageHeaderSize:]
	u32 := func(i int) uint32 { return binary.NativeEndian.Uint32(body[i:]) }
	u64 := func(i int) uint64 { return binary.NativeEndian.Uint64(body[i:]) }
	h := fnv.New64a()
	_, _ = h.Write(body[:metaChecksummed]) // hash.Hash never fails
	switch {
	case u32(0) != boltMagic:
		return meta{}, fmt.Errorf("meta page at offset %d has no bbolt magic", off)
	case u32(4) != boltVersion:
		return meta{}, fmt.Errorf("meta page at offset %d has version %d, want %d", off, u32(4), boltVersion)
	case u64(metaChecksummed) != h.Sum64():
		return meta{}, fmt.Errorf("meta page at offset %d fails its checksum", off)
	}
	m := meta{pageSize: u32(8), root: u64(16), freelist: u64(32), pgid: u64(40), txid: u64(48)}
	if m.pageSize < minPageSize || m.pageSize > maxPageSize || m.pageSize&(m.pageSize-1) != 0 {
		return meta{}, fmt.Errorf("meta page at offset %d has page size %d", off, m.pageSize)
	}
	return m, nil
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: the database is corrupt: %s", allocator.ErrStoreUnusable, fmt.Sprintf(format, args...))
}
