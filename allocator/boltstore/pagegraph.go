package boltstore

import (
	"encoding/binary"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// maxPageDepth bounds how deep the page graph may nest: branch levels of one bucket's tree plus
// the buckets nested in buckets. A bbolt tree holds at least two keys per branch page, so a tree
// 64 levels deep would need more pages than any file holds; netpool nests buckets three deep.
const maxPageDepth = 64

// Page elements (go.etcd.io/bbolt internal/common): a branch element is {pos u32, ksize u32,
// pgid u64}, a leaf element {flags u32, pos u32, ksize u32, vsize u32}, pos counting from the
// element itself; a leaf element with flag bucketLeafFlag holds a bucket header {root u64,
// sequence u64}, followed, when root is 0, by the bucket's one leaf page inline.
const (
	elementSize       = 16
	bucketHeaderSize  = 16
	bucketLeafFlag    = 0x01
	pageHeaderIDBytes = 8
)

// checkPageGraph walks every page the meta page m reaches, once, before bbolt follows any of
// them. bbolt trusts page ids: a branch element pointing at an ancestor sends its recursive
// search round until the goroutine's stack overflows, which Go cannot recover from, and an
// overflow count past the file's end makes its consistency check count to four billion. So every
// page id named (the root, each branch child, each bucket's root) must lie below the high-water
// mark with its overflow pages, hold a header naming itself as a branch or leaf page, and be
// reached only once: the two meta pages, the freelist page, the free pages it lists and every
// page of the tree each claim their pages, and a page claimed twice is a cycle, a page shared by
// two parents, or a page in use that bbolt would hand out again. Every element must lie inside
// its page, and an inline bucket's page inside its value. It reads each page in use once: O(pages),
// with one bit of memory per page.
func checkPageGraph(f *os.File, m meta) (err error) {
	pageGraphWalks.Add(1)
	length := m.pgid * uint64(m.pageSize)
	if length > uint64(maxMappable) {
		return corrupt("its meta page names %d pages of %d bytes, more than can be mapped", m.pgid, m.pageSize)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(length), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return corrupt("cannot map its %d pages to check them: %v", m.pgid, err)
	}
	defer func() { _ = unix.Munmap(data) }() // a read-only mapping; nothing to flush
	// The file was long enough when its size was read; if it shrinks while the walk reads it, the
	// read past its end is a SIGBUS, contained here as for every bbolt call.
	return contain("check the pages of", "the file", func() error {
		w := pageWalk{data: data, pageSize: uint64(m.pageSize), pgid: m.pgid, claimed: make([]uint64, (m.pgid+63)/64)}
		return w.walk(m)
	})
}

// maxMappable bounds the mapping of the pages to check (a file of up to 1 TiB).
const maxMappable = 1 << 40

// pageWalk is one walk of a file's page graph.
type pageWalk struct {
	data     []byte // pages [0, pgid) of the file
	pageSize uint64
	pgid     uint64   // the high-water mark
	claimed  []uint64 // one bit per page below pgid: set once something owns the page
}

func (w *pageWalk) walk(m meta) error {
	_ = w.claim(0, 0) // the meta pages; the bitset is empty, so neither is claimed yet
	_ = w.claim(1, 1)
	if m.freelist != noFreelist {
		if err := w.freelist(m.freelist); err != nil {
			return err
		}
	}
	return w.page(m.root, 0, 0)
}

// origin names the page that named another, for messages: a tree page, or (0) the meta page,
// which names the root and the freelist.
func origin(parent uint64) string {
	if parent == 0 {
		return "the meta page"
	}
	return fmt.Sprintf("page %d", parent)
}

// claim marks pages [first, last] as owned; it fails on the first one already owned.
func (w *pageWalk) claim(first, last uint64) (owned bool) {
	for id := first; id <= last; id++ {
		word, bit := id/64, uint64(1)<<(id%64)
		if w.claimed[word]&bit != 0 {
			return true
		}
		w.claimed[word] |= bit
	}
	return false
}

// header reads the page header at id, which the caller has checked lies below pgid.
func (w *pageWalk) header(id uint64) (self uint64, h pageHeader) {
	b := w.data[id*w.pageSize:]
	return binary.NativeEndian.Uint64(b), pageHeader{
		flags:    binary.NativeEndian.Uint16(b[pageHeaderIDBytes:]),
		count:    binary.NativeEndian.Uint16(b[pageHeaderIDBytes+2:]),
		overflow: binary.NativeEndian.Uint32(b[pageHeaderIDBytes+4:]),
	}
}

// span checks that page id and its overflow pages lie inside [first data page, pgid) and returns
// its header and its bytes; parent is the page that names it (origin).
func (w *pageWalk) span(id, parent uint64) (pageHeader, []byte, error) {
	if id < firstDataPage || id >= w.pgid {
		return pageHeader{}, nil, corrupt("%s names page %d, outside pages %d-%d", origin(parent), id, firstDataPage, w.pgid-1)
	}
	self, h := w.header(id)
	if self != id {
		return pageHeader{}, nil, corrupt("%s names page %d, whose header says it is page %d", origin(parent), id, self)
	}
	last := id + uint64(h.overflow)
	if last >= w.pgid {
		return pageHeader{}, nil, corrupt("page %d (named by %s) has %d overflow pages, past the high-water mark %d", id, origin(parent), h.overflow, w.pgid)
	}
	return h, w.data[id*w.pageSize : (last+1)*w.pageSize], nil
}

// freelist claims the freelist page and every page it lists as free.
func (w *pageWalk) freelist(id uint64) error {
	h, body, err := w.span(id, 0)
	if err != nil {
		return err
	}
	if h.flags != flagFreelist || len(body) > maxFreelistBytes {
		return corrupt("page %d is not a valid freelist page (flags %#x, %d overflow pages)", id, h.flags, h.overflow)
	}
	if w.claim(id, id+uint64(h.overflow)) {
		return corrupt("the freelist page %d overlaps a meta page", id)
	}
	ids := body[pageHeaderSize:]
	count := uint64(h.count)
	if count == 0xFFFF { // the real count is the first element
		count = binary.NativeEndian.Uint64(ids)
		ids = ids[8:]
	}
	if count > uint64(len(ids))/8 {
		return corrupt("the freelist page %d lists %d pages, more than it can hold", id, count)
	}
	for i := range count {
		free := binary.NativeEndian.Uint64(ids[8*i:])
		if free < firstDataPage || free >= w.pgid {
			return corrupt("the freelist names page %d, outside pages %d-%d", free, firstDataPage, w.pgid-1)
		}
		if w.claim(free, free) {
			return corrupt("the freelist names page %d twice, or a page that holds the freelist itself", free)
		}
	}
	return nil
}

// page walks the tree page id and everything below it; depth counts the pages and buckets above.
func (w *pageWalk) page(id, parent uint64, depth int) error {
	if depth > maxPageDepth {
		return corrupt("%s names page %d at depth %d, deeper than any bbolt tree", origin(parent), id, depth)
	}
	h, body, err := w.span(id, parent)
	if err != nil {
		return err
	}
	if h.flags != flagBranch && h.flags != flagLeaf {
		return corrupt("%s names page %d, which is neither a branch nor a leaf page (flags %#x)", origin(parent), id, h.flags)
	}
	if w.claim(id, id+uint64(h.overflow)) {
		return corrupt("%s names page %d, which is already in use (by an ancestor, another parent, the freelist or a meta page): a cycle or a shared page", origin(parent), id)
	}
	if h.flags == flagLeaf {
		return w.leaf(body, h.count, id, depth)
	}
	if h.count == 0 {
		return corrupt("branch page %d has no elements", id)
	}
	if uint64(pageHeaderSize)+uint64(h.count)*elementSize > uint64(len(body)) {
		return corrupt("branch page %d claims %d elements, more than it holds", id, h.count)
	}
	for i := range uint64(h.count) {
		off := pageHeaderSize + i*elementSize
		e := body[off:]
		pos, ksize := binary.NativeEndian.Uint32(e), binary.NativeEndian.Uint32(e[4:])
		if off+uint64(pos)+uint64(ksize) > uint64(len(body)) {
			return corrupt("branch page %d: element %d's key lies outside the page", id, i)
		}
		if err := w.page(binary.NativeEndian.Uint64(e[8:]), id, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// leaf checks the elements of a leaf page (page id's bytes, or an inline bucket's page inside an
// element of page id) and walks the buckets they hold.
func (w *pageWalk) leaf(body []byte, count uint16, id uint64, depth int) error {
	if uint64(pageHeaderSize)+uint64(count)*elementSize > uint64(len(body)) {
		return corrupt("leaf page %d claims %d elements, more than it holds", id, count)
	}
	for i := range uint64(count) {
		off := pageHeaderSize + i*elementSize
		e := body[off:]
		flags, pos := binary.NativeEndian.Uint32(e), binary.NativeEndian.Uint32(e[4:])
		ksize, vsize := binary.NativeEndian.Uint32(e[8:]), binary.NativeEndian.Uint32(e[12:])
		end := off + uint64(pos) + uint64(ksize) + uint64(vsize)
		if end > uint64(len(body)) {
			return corrupt("leaf page %d: element %d's key or value lies outside the page", id, i)
		}
		if flags&bucketLeafFlag == 0 {
			continue
		}
		value := body[end-uint64(vsize) : end]
		if err := w.bucket(value, id, depth); err != nil {
			return err
		}
	}
	return nil
}

// bucket walks the bucket whose header is value, an element of page id.
func (w *pageWalk) bucket(value []byte, id uint64, depth int) error {
	if len(value) < bucketHeaderSize {
		return corrupt("leaf page %d holds a bucket whose header is %d bytes, not %d", id, len(value), bucketHeaderSize)
	}
	if root := binary.NativeEndian.Uint64(value); root != 0 {
		return w.page(root, id, depth+1)
	}
	inline := value[bucketHeaderSize:]
	if len(inline) < pageHeaderSize {
		return corrupt("leaf page %d holds an inline bucket of %d bytes, too short for its page", id, len(value))
	}
	if depth+1 > maxPageDepth {
		return corrupt("leaf page %d holds a bucket at depth %d, deeper than any bbolt tree", id, depth+1)
	}
	if flags := binary.NativeEndian.Uint16(inline[pageHeaderIDBytes:]); flags != flagLeaf {
		return corrupt("leaf page %d holds an inline bucket whose page is not a leaf (flags %#x)", id, flags)
	}
	return w.leaf(inline, binary.NativeEndian.Uint16(inline[pageHeaderIDBytes+2:]), id, depth+1)
}
