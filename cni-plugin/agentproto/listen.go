package agentproto

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// maxSocketPath is the longest path a unix socket can be bound to on Linux (sun_path holds 108
// bytes, the last one a NUL).
const maxSocketPath = 107

// Listen listens on the unix socket at path, creating its directory. A socket file left behind
// by an agent that died is removed; a live agent on the same path is an error, and so is any
// other kind of file there. The socket is accessible to its owner only (the runtime runs as root).
//
// The socket is never reachable with wider permissions, whatever the process umask: it is bound
// inside a fresh directory of mode 0700 beside path, restricted to 0600 there, and only then
// renamed to path. Binding at path and restricting it afterwards left a window in which, under
// umask 000, an unprivileged process connected and was served.
//
// Closing the listener removes the socket file.
func Listen(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create socket directory for %s: %w", path, err)
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("failed to inspect %s: %w", path, err)
	case fi.Mode().Type() != fs.ModeSocket:
		return nil, fmt.Errorf("%s exists and is not a socket (%s); remove it or choose another path", path, fi.Mode().Type())
	default:
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			_ = c.Close() // only probing
			return nil, fmt.Errorf("another agent is already listening at %s", path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("failed to remove stale socket %s: %w", path, err)
		}
	}
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("failed to listen on %s: a unix socket path has at most %d bytes, this one %d", path, maxSocketPath, len(path))
	}
	// os.MkdirTemp makes the directory with mode 0700: a umask can only take permissions away.
	private, err := os.MkdirTemp(dir, ".netpool-agent-")
	if err != nil {
		return nil, fmt.Errorf("failed to listen on %s: failed to create a private directory: %w", path, err)
	}
	defer os.RemoveAll(private) // empty once the socket is renamed out; on failure it holds the socket
	bound := filepath.Join(private, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: bound, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("failed to listen on %s: %w", path, err)
	}
	// The listener's own unlink would remove the private path, which is gone after the rename.
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(bound, 0o600); err != nil {
		_ = ln.Close() // the chmod error is the one worth reporting
		return nil, fmt.Errorf("failed to restrict %s: %w", path, err)
	}
	if err := os.Rename(bound, path); err != nil {
		_ = ln.Close() // the rename error is the one worth reporting
		return nil, fmt.Errorf("failed to listen on %s: failed to move the socket into place: %w", path, err)
	}
	return &unixListener{UnixListener: ln, path: path, unlink: true}, nil
}

// unixListener is a listener on a socket that was bound under another name and renamed to path.
type unixListener struct {
	*net.UnixListener
	path string

	mu     sync.Mutex
	unlink bool
}

// Addr returns the socket's path, not the private one it was bound to.
func (l *unixListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

// SetUnlinkOnClose sets whether Close removes the socket file, as net.UnixListener's does.
func (l *unixListener) SetUnlinkOnClose(unlink bool) {
	l.mu.Lock()
	l.unlink = unlink
	l.mu.Unlock()
}

// Close stops listening and, the first time, removes the socket file.
func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unlink {
		l.unlink = false
		if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
			err = fmt.Errorf("failed to remove socket %s: %w", l.path, rerr)
		}
	}
	return err
}
