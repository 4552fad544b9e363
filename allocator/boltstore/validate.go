package boltstore

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
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
// the meta page it will use is intact and that every page it names lies inside the file. A file
// truncated by a full disk, a bad copy or a crashed editor would otherwise be mapped past its end,
// and the first read there is a SIGBUS that no error handling can catch. It reads two meta pages,
// the freelist and the root page header: a few preads, whatever the size of the file.
func validateFile(f *os.File, size int64) error {
	if size < minPagesInFile*minPageSize {
		return corrupt("it is %d bytes, smaller than any bbolt database", size)
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
		return corrupt("both meta pages are invalid (%v; %v)", err0, err1)
	case err1 != nil || (err0 == nil && m0.txid >= m1.txid):
		m = m0 // bbolt uses the valid meta page with the higher transaction id
	default:
		m = m1
	}
	ps := uint64(m.pageSize)
	if m.pgid < minPagesInFile || m.pgid > uint64(size)/ps {
		return corrupt("it is %d bytes, but its meta page (txid %d) says it holds %d pages of %d bytes: the file is truncated", size, m.txid, m.pgid, ps)
	}
	if m.root < firstDataPage || m.root >= m.pgid {
		return corrupt("the root page %d is outside pages %d-%d", m.root, firstDataPage, m.pgid-1)
	}
	root, err := readPageHeader(f, m.root, ps)
	if err != nil {
		return err
	}
	if root.flags&(flagBranch|flagLeaf) == 0 || m.root+uint64(root.overflow) >= m.pgid {
		return corrupt("the root page %d is not a valid branch or leaf page", m.root)
	}
	if m.freelist != noFreelist {
		return validateFreelist(f, m)
	}
	return nil
}

// validateFreelist checks the freelist page bbolt loads on every read-write open: its page ids
// must name data pages of the file, or bbolt would hand them out and write outside it.
func validateFreelist(f *os.File, m meta) error {
	ps := uint64(m.pageSize)
	if m.freelist < firstDataPage || m.freelist >= m.pgid {
		return corrupt("the freelist page %d is outside pages %d-%d", m.freelist, firstDataPage, m.pgid-1)
	}
	h, err := readPageHeader(f, m.freelist, ps)
	if err != nil {
		return err
	}
	span := (uint64(h.overflow) + 1) * ps
	if h.flags&flagFreelist == 0 || m.freelist+uint64(h.overflow) >= m.pgid || span > maxFreelistBytes {
		return corrupt("page %d is not a valid freelist page", m.freelist)
	}
	body := make([]byte, span)
	if _, err := f.ReadAt(body, int64(m.freelist*ps)); err != nil {
		return corrupt("cannot read the freelist page %d: %v", m.freelist, err)
	}
	ids := body[pageHeaderSize:]
	count := uint64(h.count)
	if count == 0xFFFF { // the real count is the first element
		count = binary.NativeEndian.Uint64(ids)
		ids = ids[8:]
	}
	if count > uint64(len(ids))/8 {
		return corrupt("the freelist page %d lists %d pages, more than it can hold", m.freelist, count)
	}
	for i := range count {
		if id := binary.NativeEndian.Uint64(ids[8*i:]); id < firstDataPage || id >= m.pgid {
			return corrupt("the freelist names page %d, outside pages %d-%d", id, firstDataPage, m.pgid-1)
		}
	}
	return nil
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

func readPageHeader(f *os.File, id, pageSize uint64) (pageHeader, error) {
	var b [pageHeaderSize]byte
	if _, err := f.ReadAt(b[:], int64(id*pageSize)); err != nil && err != io.EOF {
		return pageHeader{}, corrupt("cannot read page %d: %v", id, err)
	}
	return pageHeader{
		flags:    binary.NativeEndian.Uint16(b[8:]),
		count:    binary.NativeEndian.Uint16(b[10:]),
		overflow: binary.NativeEndian.Uint32(b[12:]),
	}, nil
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: the database is corrupt: %s", allocator.ErrStoreUnusable, fmt.Sprintf(format, args...))
}
