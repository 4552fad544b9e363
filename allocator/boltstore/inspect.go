package boltstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/netpool/netpool/allocator"
)

// OpenExisting opens the store at path for a tool that inspects or repairs it (netpoolctl --db).
// Unlike Open it never creates anything: a missing or empty file, or a bbolt file without
// netpool's buckets, is refused before anything is written, so a mistyped path cannot leave a new
// empty store behind. It takes the same file lock as the plugin, with the same bounded wait.
func OpenExisting(path string, timeout time.Duration) (*Store, error) {
	if _, err := statExisting(path); err != nil {
		return nil, err
	}
	// prepare, under the lock, refuses a corrupt file.
	return open(path, timeout, false)
}

// statExisting refuses, before anything is opened or created, a path that holds no netpool store a
// tool may read: missing, empty, a symbolic link (never followed) or not a regular file.
func statExisting(path string) (fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: %s does not exist (netpool creates it on the first ADD; check the bbolt.path of the config)", allocator.ErrStoreUnusable, path)
	case err != nil:
		return nil, fmt.Errorf("%w: failed to inspect %s: %w", allocator.ErrStoreUnusable, path, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("%w: %s is a symbolic link; netpool does not follow it (name the real file)", allocator.ErrStoreUnusable, path)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%w: %s is not a regular file (%s)", allocator.ErrStoreUnusable, path, fi.Mode().Type())
	case fi.Size() == 0:
		return nil, fmt.Errorf("%w: %s is empty: it holds no netpool store", allocator.ErrStoreUnusable, path)
	}
	return fi, nil
}

// checkBuckets refuses a database that lacks netpool's top-level buckets: a bbolt file of some
// other program, which OpenExisting must not change.
func checkBuckets(db *bolt.DB) error {
	return db.View(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketPools, bucketScopes, bucketOwners} {
			if tx.Bucket(b) == nil {
				return fmt.Errorf("it has no %q bucket: it is not a netpool store", b)
			}
		}
		return nil
	})
}
