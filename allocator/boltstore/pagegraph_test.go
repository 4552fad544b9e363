package boltstore

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/netpool/netpool/allocator"
)

// deepGoldenDB holds enough allocations that its owners bucket is three levels deep (a branch
// over branches over leaves), so that a branch can be made to point at an ancestor other than
// itself.
var deepGoldenDB = sync.OnceValues(func() ([]byte, error) { return buildGolden(12000) })

func mustDeepGolden(t testing.TB) []byte {
	t.Helper()
	b, err := deepGoldenDB()
	if err != nil {
		t.Fatalf("building the deep golden database: %v", err)
	}
	return b
}

// pages names the pages of a database image that the tests damage, as bbolt itself reports them.
type pages struct {
	root       uint64 // the top-level bucket's root page (a leaf of three bucket entries)
	freelist   uint64
	free       []uint64 // the pages the freelist lists
	ownersRoot uint64   // the owners bucket's root page, a branch
	poolsRoot  uint64   // the pools bucket's root page, a leaf holding the pool's bucket entry
	poolRoot   uint64   // the pool's bucket's root page, a leaf of its buckets alloc, meta and used
}

const testPageSize = 4096

func pagesOf(t testing.TB, b []byte) pages {
	t.Helper()
	path := filepath.Join(t.TempDir(), "layout.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var p pages
	err = db.View(func(tx *bolt.Tx) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		m, err := currentMeta(f, fi.Size())
		if err != nil {
			return err
		}
		p.root, p.freelist = m.root, m.freelist
		p.ownersRoot = uint64(tx.Bucket(bucketOwners).Root())
		pools := tx.Bucket(bucketPools)
		p.poolsRoot = uint64(pools.Root())
		return pools.ForEachBucket(func(k []byte) error {
			p.poolRoot = uint64(pools.Bucket(k).Root())
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	fl := b[p.freelist*testPageSize:]                            // with its overflow pages
	for i := range uint64(binary.NativeEndian.Uint16(fl[10:])) { // fewer than 0xFFFF here
		p.free = append(p.free, binary.NativeEndian.Uint64(fl[pageHeaderSize+8*i:]))
	}
	if flags(b, p.ownersRoot) != flagBranch || flags(b, p.poolsRoot) != flagLeaf || flags(b, p.poolRoot) != flagLeaf || len(p.free) == 0 {
		t.Fatalf("the golden database is not shaped as the tests expect: %+v", p)
	}
	return p
}

func page(b []byte, id uint64) []byte { return b[id*testPageSize : (id+1)*testPageSize] }

func flags(b []byte, id uint64) uint16 { return binary.NativeEndian.Uint16(page(b, id)[8:]) }

// childAt is the offset in the image of the page id that element i of branch page id names.
func childAt(id uint64, i int) int { return int(id)*testPageSize + pageHeaderSize + i*elementSize + 8 }

func child(b []byte, id uint64, i int) uint64 {
	return binary.NativeEndian.Uint64(b[childAt(id, i):])
}

func setUint64(b []byte, off int, v uint64) { binary.NativeEndian.PutUint64(b[off:], v) }

// leafElementAt is the offset in the image of element i of leaf page id.
func leafElementAt(id uint64, i int) int {
	return int(id)*testPageSize + pageHeaderSize + i*elementSize
}

// valueAt is the offset in the image of the value of element i of leaf page id.
func valueAt(b []byte, id uint64, i int) int {
	e := leafElementAt(id, i)
	return e + int(binary.NativeEndian.Uint32(b[e+4:])+binary.NativeEndian.Uint32(b[e+8:]))
}

// elementNamed is the index of the element of leaf page id whose key is key.
func elementNamed(t testing.TB, b []byte, id uint64, key string) int {
	t.Helper()
	for i := range int(binary.NativeEndian.Uint16(page(b, id)[10:])) {
		e := leafElementAt(id, i)
		pos, ksize := int(binary.NativeEndian.Uint32(b[e+4:])), int(binary.NativeEndian.Uint32(b[e+8:]))
		if string(b[e+pos:e+pos+ksize]) == key {
			return i
		}
	}
	t.Fatalf("leaf page %d has no element %q", id, key)
	return 0
}

// editMeta changes the meta page bbolt uses and signs it again, as only a hand edit would.
func editMeta(b []byte, edit func(body []byte)) {
	off := 0
	t0, t1 := binary.NativeEndian.Uint64(b[pageHeaderSize+48:]), binary.NativeEndian.Uint64(b[testPageSize+pageHeaderSize+48:])
	if t1 > t0 {
		off = testPageSize
	}
	body := b[off+pageHeaderSize : off+pageHeaderSize+metaBodySize]
	edit(body)
	h := fnv.New64a()
	_, _ = h.Write(body[:metaChecksummed])
	binary.NativeEndian.PutUint64(body[metaChecksummed:], h.Sum64())
}

// pageDamage is one edit of a database image that bbolt would follow into a fault, an endless
// recursion or an unbounded loop, and the words the refusal must contain.
type pageDamage struct {
	name, want string
	deep       bool // damage the deep golden database
	edit       func(t testing.TB, b []byte, p pages)
}

var pageDamages = []pageDamage{
	{name: "a branch element names its own page", want: "a cycle or a shared page", edit: func(_ testing.TB, b []byte, p pages) {
		setUint64(b, childAt(p.ownersRoot, 1), p.ownersRoot)
	}},
	{name: "a branch element names its parent", want: "a cycle or a shared page", deep: true, edit: func(t testing.TB, b []byte, p pages) {
		mid := child(b, p.ownersRoot, 0)
		if flags(b, mid) != flagBranch {
			t.Fatalf("page %d under the owners root is not a branch", mid)
		}
		setUint64(b, childAt(mid, 2), p.ownersRoot)
	}},
	{name: "two branch elements name one page", want: "a cycle or a shared page", edit: func(_ testing.TB, b []byte, p pages) {
		setUint64(b, childAt(p.ownersRoot, 1), child(b, p.ownersRoot, 0))
	}},
	{name: "a branch element names the freelist page", want: "neither a branch nor a leaf", edit: func(_ testing.TB, b []byte, p pages) {
		setUint64(b, childAt(p.ownersRoot, 0), p.freelist)
	}},
	{name: "a branch element names a free page", want: "already in use", edit: func(_ testing.TB, b []byte, p pages) {
		setUint64(b, childAt(p.ownersRoot, 0), p.free[0])
	}},
	{name: "a branch element names a meta page", want: "outside pages", edit: func(_ testing.TB, b []byte, p pages) {
		setUint64(b, childAt(p.ownersRoot, 0), 1)
	}},
	{name: "a branch element names a page past the high-water mark", want: "outside pages", edit: func(_ testing.TB, b []byte, p pages) {
		setUint64(b, childAt(p.ownersRoot, 0), 1<<40)
	}},
	{name: "a branch page without elements", want: "has no elements", edit: func(_ testing.TB, b []byte, p pages) {
		binary.NativeEndian.PutUint16(page(b, p.ownersRoot)[10:], 0)
	}},
	{name: "a branch page claims more elements than it holds", want: "more than it holds", edit: func(_ testing.TB, b []byte, p pages) {
		binary.NativeEndian.PutUint16(page(b, p.ownersRoot)[10:], 0xFFFF)
	}},
	{name: "a leaf with overflow 0xffffffff", want: "overflow pages, past the high-water mark", edit: func(_ testing.TB, b []byte, p pages) {
		binary.NativeEndian.PutUint32(page(b, child(b, p.ownersRoot, 0))[12:], 0xFFFFFFFF)
	}},
	{name: "a leaf whose header names another page", want: "whose header says it is page", edit: func(_ testing.TB, b []byte, p pages) {
		leaf := child(b, p.ownersRoot, 0)
		setUint64(b, int(leaf)*testPageSize, leaf+1)
	}},
	{name: "a leaf element's key lies outside the page", want: "lies outside the page", edit: func(_ testing.TB, b []byte, p pages) {
		binary.NativeEndian.PutUint32(b[leafElementAt(child(b, p.ownersRoot, 0), 0)+4:], 0x7FFFFFFF)
	}},
	{name: "a bucket's root names the top-level root", want: "a cycle or a shared page", edit: func(t testing.TB, b []byte, p pages) {
		setUint64(b, valueAt(b, p.poolRoot, elementNamed(t, b, p.poolRoot, "alloc")), p.root)
	}},
	{name: "a bucket's root names its parent bucket's page", want: "a cycle or a shared page", edit: func(t testing.TB, b []byte, p pages) {
		setUint64(b, valueAt(b, p.poolRoot, elementNamed(t, b, p.poolRoot, "used")), p.poolsRoot)
	}},
	{name: "an inline bucket's page is a branch", want: "inline bucket whose page is not a leaf", edit: func(t testing.TB, b []byte, p pages) {
		v := valueAt(b, p.poolRoot, elementNamed(t, b, p.poolRoot, "meta"))
		if binary.NativeEndian.Uint64(b[v:]) != 0 {
			t.Fatal("the pool's meta bucket is not inline")
		}
		binary.NativeEndian.PutUint16(b[v+bucketHeaderSize+8:], flagBranch)
	}},
	{name: "the freelist lists a page in use", want: "already in use", edit: func(_ testing.TB, b []byte, p pages) {
		setUint64(b, int(p.freelist)*testPageSize+pageHeaderSize, p.ownersRoot)
	}},
	{name: "the freelist lists a page twice", want: "twice", edit: func(_ testing.TB, b []byte, p pages) {
		setUint64(b, int(p.freelist)*testPageSize+pageHeaderSize+8, p.free[0])
	}},
	{name: "the freelist lists its own page", want: "holds the freelist itself", edit: func(_ testing.TB, b []byte, p pages) {
		setUint64(b, int(p.freelist)*testPageSize+pageHeaderSize, p.freelist)
	}},
	{name: "the meta page's root is the freelist page", want: "neither a branch nor a leaf", edit: func(_ testing.TB, b []byte, p pages) {
		editMeta(b, func(body []byte) { setUint64(body, 16, p.freelist) })
	}},
	{name: "the meta page's freelist is the root page", want: "not a valid freelist page", edit: func(_ testing.TB, b []byte, p pages) {
		editMeta(b, func(body []byte) { setUint64(body, 32, p.root) })
	}},
}

// damaged returns a copy of the golden database (deep or not) with d applied.
func (d pageDamage) damaged(t testing.TB) []byte {
	t.Helper()
	golden := mustGolden(t)
	if d.deep {
		golden = mustDeepGolden(t)
	}
	b := append([]byte(nil), golden...)
	d.edit(t, b, pagesOf(t, golden))
	return b
}

// TestDamagedPageGraphIsRefused: each damage to the page graph that would send bbolt into a
// stack overflow (a cycle of branch pages), an unbounded loop (an overflow of four billion pages)
// or a read outside the page is refused before bbolt follows it, by every call the plugin makes
// (ErrStoreUnusable, CNI 105, naming the file and the page) and by Verify, and the file is left
// as it was.
func TestDamagedPageGraphIsRefused(t *testing.T) {
	for _, d := range pageDamages {
		t.Run(d.name, func(t *testing.T) {
			b := d.damaged(t)
			path := writeDB(t, b)
			done := make(chan error, 1)
			go func() { done <- exercise(path) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the calls on the damaged file did not end")
			}
			if !errors.Is(err, allocator.ErrStoreUnusable) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), d.want) {
				t.Fatalf("the plugin's calls = %v; want ErrStoreUnusable naming %s and saying %q", err, path, d.want)
			}
			_, err = Verify(t.Context(), path, time.Second)
			if !errors.Is(err, allocator.ErrStoreUnusable) || !strings.Contains(err.Error(), d.want) {
				t.Fatalf("Verify = %v; want ErrStoreUnusable saying %q", err, d.want)
			}
			if got, err := os.ReadFile(path); err != nil || string(got) != string(b) {
				t.Errorf("the damaged file was changed (%v)", err)
			}
		})
	}
}

// TestSoundPageGraphIsAccepted: the walk accepts what bbolt writes, at both depths and after
// every kind of call (inline buckets, nested buckets, a freelist, overflow pages of a big value).
func TestSoundPageGraphIsAccepted(t *testing.T) {
	for name, b := range map[string][]byte{"golden": mustGolden(t), "deep": mustDeepGolden(t)} {
		t.Run(name, func(t *testing.T) {
			path := writeDB(t, b)
			if err := exercise(path); err != nil {
				t.Fatal(err)
			}
			v, err := Verify(t.Context(), path, time.Second)
			if err != nil || len(v.Findings) != 0 {
				t.Fatalf("Verify = %v, %v", v.Findings, err)
			}
		})
	}
	t.Run("a value spanning overflow pages", func(t *testing.T) {
		s, path := mustOpen(t)
		err := s.db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketOwners).Put([]byte("big"), make([]byte, 5*testPageSize))
		})
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := validateFile(f); err != nil {
			t.Fatalf("a leaf with overflow pages: %v", err)
		}
	})
}
