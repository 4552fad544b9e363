package harness

import (
	"encoding/binary"
	"fmt"
)

// BboltUsedBytes is the size of the pages that the newer meta page of a bbolt database image says
// are in use (its high-water mark times its page size). bbolt grows a file in larger steps, so the
// file may be longer; what netpool reads of a file (the page checks before it is mapped) grows with
// this size.
func BboltUsedBytes(db []byte) (int, error) {
	const header, metaBody = 16, 64
	meta := func(off int) (pageSize uint32, pgid, txid uint64, ok bool) {
		if len(db) < off+header+metaBody {
			return 0, 0, 0, false
		}
		body := db[off+header:]
		return binary.NativeEndian.Uint32(body[8:]), binary.NativeEndian.Uint64(body[40:]), binary.NativeEndian.Uint64(body[48:]), true
	}
	ps, pgid, txid, ok := meta(0)
	if !ok || ps == 0 {
		return 0, fmt.Errorf("the first meta page of a %d-byte image cannot be read", len(db))
	}
	if ps1, pgid1, txid1, ok := meta(int(ps)); ok && txid1 > txid {
		ps, pgid = ps1, pgid1
	}
	used := int(pgid) * int(ps)
	if pgid < 4 || used > len(db) {
		return 0, fmt.Errorf("cannot read the high-water mark of a %d-byte image (%d pages of %d bytes)", len(db), pgid, ps)
	}
	return used, nil
}
