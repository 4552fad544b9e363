package boltstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/netpool/netpool/allocator"
)

// FuzzCorruptDatabase damages a real database (1500 allocations, a third released) by truncating
// it and overwriting bytes at an offset, then runs what the plugin runs on it: open, STATUS, ADD,
// DEL, GC. Each must succeed or fail with ErrStoreUnusable (CNI 105); none may panic, fault,
// overflow its stack or hang. The seeds (among them every damage of pageDamages: cycles of pages,
// an overflow of 0xffffffff, elements outside their page) run in go test; make fuzz explores
// further.
func FuzzCorruptDatabase(f *testing.F) {
	golden := mustGolden(f)
	hwm := uint32(highWater(f, golden))
	f.Add(hwm, uint32(0), []byte{})                         // intact
	f.Add(hwm/2, uint32(0), []byte{})                       // truncated
	f.Add(hwm, uint32(16), []byte{0, 0, 0, 0})              // meta 0 magic
	f.Add(hwm, uint32(2*4096), []byte{0xff, 0xff, 0xff})    // a page id
	f.Add(hwm, uint32(2*4096+8), []byte{0x10, 0})           // page flags
	f.Add(hwm, uint32(3*4096+10), []byte{0xff, 0xff})       // a count
	f.Add(hwm, uint32(5*4096+12), []byte{0xff, 0xff, 0, 0}) // an overflow
	f.Add(hwm-1, uint32(4096+16+40), []byte{0xff})          // meta 1 high water mark
	addPageDamageSeeds(f, golden)
	f.Fuzz(func(t *testing.T, size, offset uint32, patch []byte) {
		b := append([]byte(nil), golden[:min(int(size), len(golden))]...)
		if len(b) > 0 {
			copy(b[int(offset)%len(b):], patch)
		}
		path := filepath.Join(t.TempDir(), "netpool.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := exercise(path); err != nil && !errors.Is(err, allocator.ErrStoreUnusable) {
			t.Fatalf("got %v, want nil or ErrStoreUnusable", err)
		}
	})
}

// addPageDamageSeeds adds, for each damage of pageDamages that applies to the golden database, the
// seed that makes it: the golden size and the damaged bytes from the first changed to the last.
func addPageDamageSeeds(f *testing.F, golden []byte) {
	for _, d := range pageDamages {
		if d.deep {
			continue
		}
		b := d.damaged(f)
		first, last := -1, -1
		for i := range b {
			if b[i] != golden[i] {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		if first < 0 {
			f.Fatalf("damage %q changes nothing", d.name)
		}
		f.Add(uint32(len(golden)), uint32(first), b[first:last+1])
	}
}
