package agentproto

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// withUmask runs f with the process umask set to mask, the most permissive a runtime might leave
// the agent: Listen must not rely on it. The umask is the process's, so these tests are not
// parallel.
func withUmask(mask int, f func()) {
	old := syscall.Umask(mask)
	defer syscall.Umask(old)
	f()
}

// TestListenSocketNeverAppearsOpen watches the socket's directory with inotify while Listen runs
// under umask 000: the socket's name never appears there by a bind (IN_CREATE), only by the rename
// of a socket already restricted to 0600 (IN_MOVED_TO); the one thing created in the directory is
// the private directory (os.MkdirTemp's, mode 0700, gone by the time Listen returns). Binding in place and chmod-ing afterwards would show an
// IN_CREATE of agent.sock, a socket of mode 0777 for as long as the chmod took.
func TestListenSocketNeverAppearsOpen(t *testing.T) {
	path := socketPath(t)
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	withUmask(0, func() { ln, err = Listen(path) })
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	var created, moved []string
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.PathMax))
	n, err := unix.Read(fd, buf)
	if err != nil {
		t.Fatalf("reading the directory's inotify events: %v", err)
	}
	for off := 0; off+unix.SizeofInotifyEvent <= n; {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
		switch {
		case ev.Mask&unix.IN_CREATE != 0 && ev.Mask&unix.IN_ISDIR != 0:
			created = append(created, name+"/")
		case ev.Mask&unix.IN_CREATE != 0:
			created = append(created, name)
		case ev.Mask&unix.IN_MOVED_TO != 0:
			moved = append(moved, name)
		}
		off += unix.SizeofInotifyEvent + int(ev.Len)
	}
	if len(created) != 1 || !strings.HasPrefix(created[0], ".netpool-agent-") || !strings.HasSuffix(created[0], "/") {
		t.Errorf("created in %s: %q; want only the private directory .netpool-agent-*/ (never the socket itself)", dir, created)
	}
	if len(moved) != 1 || moved[0] != filepath.Base(path) {
		t.Errorf("moved into %s: %q; want only %s", dir, moved, filepath.Base(path))
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s is %v, want a socket of mode 0600", path, fi.Mode())
	}
}

// TestListenUnprivilegedCannotConnect binds the socket under umask 000 and connects to it from a
// process of uid 65534 (nobody), which can reach the socket's directory: the connection is refused
// with EACCES. The same process connects once the socket is made 0666, so the refusal is the
// socket's mode, not the path.
func TestListenUnprivilegedCannotConnect(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: connecting as another uid needs root (run as root, as CI does)")
	}
	// Every directory on the way is traversable by nobody; the test binary is copied where
	// nobody may run it.
	top, err := os.MkdirTemp("", "npu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(top) })
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(top, "run", "agent.sock")
	bin := filepath.Join(top, "helper.test")
	copyExecutable(t, os.Args[0], bin)

	var ln net.Listener
	withUmask(0, func() { ln, err = Listen(path) })
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go acceptAndClose(ln)
	connect := func() (string, error) {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), connectEnv+"="+path)
		cmd.Dir = top
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := connect(); err == nil || !strings.Contains(out, "permission denied") {
		t.Errorf("nobody connecting to the agent's socket: %v\n%s\nwant it refused with permission denied", err, out)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if out, err := connect(); err != nil {
		t.Errorf("nobody connecting to the socket made 0666 (the check's control): %v\n%s", err, out)
	}
}

// connectEnv names the socket the test binary, started again as nobody, connects to (TestMain).
const connectEnv = "NETPOOL_TEST_CONNECT"

// TestMain is the package's tests, or, started by TestListenUnprivilegedCannotConnect with
// connectEnv set, the unprivileged process that connects to the socket and exits 1 with the
// dial's error.
func TestMain(m *testing.M) {
	if path := os.Getenv(connectEnv); path != "" {
		c, err := net.Dial("unix", path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "dial %s as uid %d: %v\n", path, os.Getuid(), err)
			os.Exit(1)
		}
		_ = c.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// copyExecutable copies the file at src to dst with mode 0755.
func copyExecutable(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, 0o755); err != nil {
		t.Fatal(err)
	}
}
