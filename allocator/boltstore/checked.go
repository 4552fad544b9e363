package boltstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/netpool/netpool/allocator"
)

// The page graph walk (checkPageGraph) reads every page in use: a few milliseconds on a 10 MB
// file, on every plugin call. So the sidecar lock file remembers the last state of the database
// that a walk found sound, or that a netpool call left behind after starting from a sound one, and
// the next call walks only when the file is not in that state. A commit from a sound state is
// sound: bbolt writes its new pages from the nodes it read and only into pages the checked
// freelist names as free, and every page it does not write was checked before.
//
// A state is the file's identity and inode times, the meta page bbolt will use, and the boot:
// anything that changes the file by write(2), truncate, rename or a copy moves its ctime (which no
// caller can set back), and after a reboot, when pages a disk acknowledged but lost may come back
// stale, the first call walks again. What it cannot see: a write by something that ignores the lock
// while a netpool call holds it, and, on a file system whose timestamps are coarser than the time
// between two writes, a write within the same tick as netpool's last.

// stateKeySize is the length of a remembered state: a version, device, inode, size, mtime, ctime
// (seconds and nanoseconds each), the meta page's txid, root, freelist, high-water mark and page
// size, and the boot id.
const stateKeySize = 8 + 8*12 + 16

// stateKeyVersion starts every remembered state, so that a record of another layout never matches.
const stateKeyVersion = 0x6e70636b31000001 // "npck1", layout 1

// pageGraphWalks counts the walks that ran in this process, for the tests and benchmarks that
// tell a remembered state from a walked one.
var pageGraphWalks atomic.Int64

// bootID is this boot's identity; nil when it cannot be read, which turns the memory off.
var bootID = sync.OnceValue(func() []byte {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return nil
	}
	id := make([]byte, 16)
	n := 0
	for _, c := range b { // "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx\n"
		v, ok := hexDigit(c)
		if !ok {
			continue
		}
		if n == 32 {
			return nil
		}
		id[n/2] |= v << (4 * (1 - n%2))
		n++
	}
	if n != 32 {
		return nil
	}
	return id
})

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// stateKey is the state of the database file fi (from fstat), whose current meta page is m; nil
// when it cannot be told (no boot id), so that nothing is remembered or trusted.
func stateKey(fi fs.FileInfo, m meta) []byte {
	boot := bootID()
	st, ok := fi.Sys().(*syscall.Stat_t)
	if boot == nil || !ok {
		return nil
	}
	k := make([]byte, 0, stateKeySize)
	for _, v := range []uint64{stateKeyVersion, st.Dev, st.Ino, uint64(st.Size),
		uint64(st.Mtim.Sec), uint64(st.Mtim.Nsec), uint64(st.Ctim.Sec), uint64(st.Ctim.Nsec),
		m.txid, m.root, m.freelist, m.pgid, uint64(m.pageSize)} {
		k = binary.LittleEndian.AppendUint64(k, v)
	}
	return append(k, boot...)
}

// remembers reports whether the lock file holds key as the last sound state.
func (l *fileLock) remembers(key []byte) bool {
	if key == nil {
		return false
	}
	got := make([]byte, len(key))
	n, _ := l.f.ReadAt(got, 0) // a short or failed read is a state not remembered
	return n == len(key) && bytes.Equal(got, key)
}

// remember records key as the last sound state. It is a cache: a failed write (a full disk)
// costs the next call a walk, nothing more, so it is not synced and its error is dropped.
func (l *fileLock) remember(key []byte) {
	if key != nil {
		_, _ = l.f.WriteAt(key, 0)
	}
}

// forget drops the remembered state, so the next call walks. It overwrites the record's version
// rather than truncating the file: ext4 flushes a file truncated to zero and written again on its
// close, which would cost the next call a write-back.
func (l *fileLock) forget() {
	_, _ = l.f.WriteAt(make([]byte, 8), 0)
}

// fileState is what prepare checked: the file's identity (device and inode), so that the file
// bbolt opens can be held to be the one checked, and its state (stateKey).
type fileState struct {
	dev, ino uint64
	key      []byte
}

// checkFile checks the open database f as validateFile does, but skips the page graph walk when
// lock (nil: never) remembers the file's state as sound, and remembers it once walked.
func checkFile(f *os.File, lock *fileLock) (fileState, error) {
	fi, err := f.Stat()
	if err != nil {
		return fileState{}, fmt.Errorf("%w: failed to inspect it: %w", allocator.ErrStoreUnusable, err)
	}
	m, err := currentMeta(f, fi.Size())
	if err != nil {
		return fileState{}, err
	}
	st := fileState{key: stateKey(fi, m)}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.dev, st.ino = sys.Dev, sys.Ino
	}
	if lock != nil && lock.remembers(st.key) {
		return st, nil
	}
	if err := checkPageGraph(f, m); err != nil {
		return fileState{}, err
	}
	if lock != nil {
		lock.remember(st.key)
	}
	return st, nil
}
