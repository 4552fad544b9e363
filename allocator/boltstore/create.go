package boltstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/netpool/netpool/allocator"
)

// creatingSuffix names the file a new database is built in before it is renamed into place. One
// name, not one per process: creation runs under the sidecar lock, and a leftover from a process
// that died while creating is removed by the next one.
const creatingSuffix = ".creating"

// prepare makes path ready for bolt.Open, under the sidecar lock: a missing (or empty) database is
// created whole when mayCreate, and refused otherwise; an existing one must be a regular file, not
// a symbolic link, whose meta page is sound and whose page graph is either in the state the lock
// file remembers as sound (checked.go) or walked now (checkPageGraph). It returns the identity
// and state of the file it checked, so that the file bbolt opens can be held to be that one.
//
// bbolt would follow a symbolic link and initialise whatever empty file it points at, would map a
// truncated file past its end, and would recurse for ever on a cycle of pages; bbolt's own creation
// writes the file in place, so a full disk left a partial file that failed every later call. None
// of that can happen here.
func prepare(path string, timeout time.Duration, mayCreate bool, lock *fileLock) (fileState, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !mayCreate:
		return fileState{}, fmt.Errorf("%w: %s does not exist", allocator.ErrStoreUnusable, path)
	case errors.Is(err, fs.ErrNotExist):
		err = create(path, timeout)
	case err != nil:
		return fileState{}, fmt.Errorf("%w: failed to inspect %s: %w", allocator.ErrStoreUnusable, path, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return fileState{}, fmt.Errorf("%w: %s is a symbolic link; netpool does not follow it (set bbolt.path to the real file)", allocator.ErrStoreUnusable, path)
	case !fi.Mode().IsRegular():
		return fileState{}, fmt.Errorf("%w: %s is not a regular file (%s)", allocator.ErrStoreUnusable, path, fi.Mode().Type())
	case fi.Size() == 0 && !mayCreate:
		return fileState{}, fmt.Errorf("%w: %s is empty: it holds no netpool store", allocator.ErrStoreUnusable, path)
	case fi.Size() == 0:
		// An empty file holds nothing: create the database beside it and rename it over.
		err = create(path, timeout)
	}
	if err != nil {
		return fileState{}, err
	}
	// A file just created is checked too (four pages), so that it has an identity to hold bbolt's
	// file to.
	f, err := openNoFollow(path, os.O_RDONLY|syscall.O_NONBLOCK, 0) // a FIFO swapped in must not block
	if err != nil {
		return fileState{}, fmt.Errorf("%w: failed to open %s: %w", allocator.ErrStoreUnusable, path, err)
	}
	defer f.Close() // read only; nothing to flush
	st, err := checkFile(f, lock)
	if err != nil {
		return fileState{}, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// create builds an empty database (with netpool's buckets) under a temporary name, syncs it,
// renames it to path and syncs the directory, so path either does not exist or is a complete
// database, whatever fails (ENOSPC) or dies on the way.
func create(path string, timeout time.Duration) error {
	tmp := path + creatingSuffix
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: failed to remove the leftover %s: %w", allocator.ErrStoreUnusable, tmp, err)
	}
	err := build(tmp, timeout)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		_ = os.Remove(tmp) // the creation error is the one worth reporting
		return fmt.Errorf("%w: failed to create %s: %w", allocator.ErrStoreUnusable, path, err)
	}
	return nil
}

func build(tmp string, timeout time.Duration) error {
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: timeout, OpenFile: openNoFollow})
	if err != nil {
		return err
	}
	if err := ensureBuckets(db); err != nil {
		_ = db.Close() // the bucket error is the one worth reporting
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	// bbolt fdatasyncs what it writes; one fsync more makes the size and the inode durable too
	// before the rename publishes the file.
	f, err := os.OpenFile(tmp, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// openNoFollow is bbolt's OpenFile: it refuses a symbolic link at the last component (ELOOP) and
// anything but a regular file, so a path swapped after prepare looked at it is refused too.
func openNoFollow(name string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(name, flag|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (%s)", name, fi.Mode().Type())
	}
	if err != nil {
		_ = f.Close() // the type error is the one worth reporting
		return nil, err
	}
	return f, nil
}
