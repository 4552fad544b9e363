package install

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// replaceFile makes dst hold data (mode perm) atomically: a temporary file in dst's directory is
// written, fsynced and renamed over dst, and the directory is fsynced so that the rename survives a
// crash. A process that opens or execs dst at any instant sees the old file or the new one, never
// a part of either. It reports false, and touches nothing, when dst already holds exactly data
// with that mode.
func replaceFile(dst string, data []byte, perm os.FileMode) (bool, error) {
	if same, err := holds(dst, data, perm); err != nil || same {
		return false, err
	}
	dir := filepath.Dir(dst)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return false, hostPathError(dir, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return false, hostPathError(dir, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		return false, hostPathError(dir, err)
	}
	if err := tmp.Sync(); err != nil {
		return false, hostPathError(dir, err)
	}
	if err := tmp.Close(); err != nil {
		return false, hostPathError(dir, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return false, hostPathError(dir, err)
	}
	committed = true
	return true, syncDir(dir)
}

// holds reports whether path is a regular file with exactly data and mode perm.
func holds(path string, data []byte, perm os.FileMode) (bool, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, hostPathError(filepath.Dir(path), err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != perm || fi.Size() != int64(len(data)) {
		return false, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return false, hostPathError(filepath.Dir(path), err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false, hostPathError(filepath.Dir(path), err)
	}
	want := sha256.Sum256(data)
	return bytes.Equal(h.Sum(nil), want[:]), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return hostPathError(dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return hostPathError(dir, err)
	}
	return nil
}

// hostPathError says what is wrong with a host directory in the words an operator needs: the
// usual causes are a hostPath that is not mounted, or mounted read-only.
func hostPathError(dir string, err error) error {
	switch {
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%s is on a read-only file system: mount the host path read-write: %w", dir, err)
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s does not exist: is the host path mounted? %w", dir, err)
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("%s is not writable by this process: %w", dir, err)
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("no space left in %s: %w", dir, err)
	}
	return fmt.Errorf("%s: %w", dir, err)
}
