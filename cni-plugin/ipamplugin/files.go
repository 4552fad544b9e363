package ipamplugin

import (
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/netpool/netpool/ipam"
)

// FlatConfigReadTimeout bounds reading configuration_path. The file is read before lock_timeout
// is known (the file may set it), so the read has a bound of its own.
const FlatConfigReadTimeout = 2 * time.Second

// ReadConfigFile is the binary's ipam.FlatReader: configuration_path comes from the NAD, so it
// opens without blocking (a FIFO must not hang the call), accepts regular files only (not
// /dev/zero, not a directory), at most ipam.MaxFlatConfigSize bytes, read within
// FlatConfigReadTimeout. A missing file keeps fs.ErrNotExist in its chain.
func ReadConfigFile(path string) ([]byte, error) {
	return readBounded(path, ipam.MaxFlatConfigSize, FlatConfigReadTimeout)
}

func readBounded(path string, limit int64, timeout time.Duration) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	case fi.Size() > limit:
		err = fmt.Errorf("%s is %d bytes, more than the %d netpool reads", path, fi.Size(), limit)
	}
	if err != nil {
		_ = f.Close() // read only; the check's error is the one worth reporting
		return nil, err
	}
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The file may grow after the fstat: never read more than the limit allows.
		b, err := io.ReadAll(io.LimitReader(f, limit+1))
		_ = f.Close() // read only
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		if r.err == nil && int64(len(r.b)) > limit {
			r.err = fmt.Errorf("%s grew past the %d bytes netpool reads", path, limit)
		}
		return r.b, r.err
	case <-time.After(timeout):
		// A hung network file system: the reading goroutine is left to finish on its own.
		return nil, fmt.Errorf("%s was not read within %v", path, timeout)
	}
}

// OpenLogFile opens log_file for appending, under the same rules as ReadConfigFile: without
// blocking, and regular files only, so a NAD cannot point the log at a FIFO, a terminal or a
// device; and not through a symbolic link at the last component, so it cannot make netpool
// create or append to a file elsewhere. It creates the file (0600) when it is missing.
func OpenLogFile(path string) (io.WriteCloser, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	if err != nil {
		_ = f.Close() // nothing was written; the check's error is the one worth reporting
		return nil, err
	}
	return f, nil
}
