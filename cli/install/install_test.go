package install

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netpool/netpool/ipam"
)

// node lays out a source dir with a fake plugin and the host's two directories, as the DaemonSet
// mounts them.
type node struct{ src, bin, netd string }

func newNode(t *testing.T, plugin []byte) node {
	t.Helper()
	n := node{src: t.TempDir(), bin: t.TempDir(), netd: t.TempDir()}
	if err := os.WriteFile(filepath.Join(n.src, "netpool"), plugin, 0o755); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n node) options(flat *FlatConfig) Options {
	return Options{SourceDir: n.src, CNIBinDir: n.bin, NetDir: n.netd, Flat: flat}
}

func changed(cs []Change) (n int) {
	for _, c := range cs {
		if c.Changed {
			n++
		}
	}
	return n
}

// entries lists a directory, to show that nothing (no temporary file) was left behind.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestInstall(t *testing.T) {
	n := newNode(t, []byte("plugin v1"))
	flat := &FlatConfig{Datastore: ipam.DatastoreKubernetes, AgentSocket: "/run/netpool/agent.sock", LogLevel: "info"}
	cs, err := Install(n.options(flat))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || changed(cs) != 2 {
		t.Fatalf("first install: %+v, want the plugin and the flat file written", cs)
	}
	got, err := os.ReadFile(filepath.Join(n.bin, "netpool"))
	if err != nil || string(got) != "plugin v1" {
		t.Fatalf("installed plugin = %q, %v", got, err)
	}
	if fi, _ := os.Stat(filepath.Join(n.bin, "netpool")); fi.Mode().Perm() != 0o755 {
		t.Errorf("plugin mode %v, want 0755", fi.Mode().Perm())
	}
	if e := entries(t, n.bin); len(e) != 1 {
		t.Errorf("bin dir holds %v, want only netpool (no egress router in the source, no temporary file)", e)
	}
	// The plugin reads the flat file under a NAD that names only a range.
	data, err := os.ReadFile(filepath.Join(n.netd, FlatConfigName))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ipam.Load([]byte(`{"cniVersion":"1.1.0","name":"n","ipam":{"type":"netpool","range":"10.0.0.0/24"}}`), "",
		func(string) ([]byte, error) { return data, nil })
	if err != nil {
		t.Fatalf("the plugin refuses the flat file %s: %v", data, err)
	}
	if c.Datastore != ipam.DatastoreKubernetes || c.AgentSocket != "/run/netpool/agent.sock" || c.LogLevel != "info" {
		t.Errorf("flat file read back as datastore %q socket %q level %q", c.Datastore, c.AgentSocket, c.LogLevel)
	}

	t.Run("again: nothing changes", func(t *testing.T) {
		before, _ := os.Stat(filepath.Join(n.bin, "netpool"))
		cs, err := Install(n.options(flat))
		if err != nil || changed(cs) != 0 || len(cs) != 2 {
			t.Fatalf("second install: %+v, %v; want both unchanged", cs, err)
		}
		after, _ := os.Stat(filepath.Join(n.bin, "netpool"))
		if !os.SameFile(before, after) {
			t.Error("an unchanged plugin was replaced")
		}
	})
	t.Run("upgrade: the new binary and the egress router", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(n.src, "netpool"), []byte("plugin v2"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(n.src, "netpool-egress-router"), []byte("router"), 0o755); err != nil {
			t.Fatal(err)
		}
		cs, err := Install(n.options(flat))
		if err != nil || changed(cs) != 2 {
			t.Fatalf("upgrade: %+v, %v; want two binaries written, the flat file unchanged", cs, err)
		}
		got, _ := os.ReadFile(filepath.Join(n.bin, "netpool"))
		if string(got) != "plugin v2" {
			t.Errorf("plugin after upgrade = %q", got)
		}
		if e := entries(t, n.bin); strings.Join(e, ",") != "netpool,netpool-egress-router" {
			t.Errorf("bin dir after upgrade holds %v", e)
		}
	})
}

// TestInstallRefusesBadInput: every bad input is refused before anything is written.
func TestInstallRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(t *testing.T, n *node, o *Options)
		error string
	}{
		{"missing CNI bin dir", func(t *testing.T, n *node, o *Options) { o.CNIBinDir = filepath.Join(n.bin, "absent") }, "does not exist: is the host path mounted?"},
		{"CNI bin dir is a file", func(t *testing.T, n *node, o *Options) {
			o.CNIBinDir = filepath.Join(n.src, "netpool")
		}, "is not a directory"},
		{"relative CNI bin dir", func(t *testing.T, n *node, o *Options) { o.CNIBinDir = "opt/cni/bin" }, "must be an absolute path"},
		{"missing net dir", func(t *testing.T, n *node, o *Options) { o.NetDir = filepath.Join(n.netd, "absent") }, "CNI config dir"},
		{"no plugin in the source", func(t *testing.T, n *node, o *Options) { o.SourceDir = t.TempDir() }, "plugin netpool"},
		{"plugin source is a directory", func(t *testing.T, n *node, o *Options) {
			o.SourceDir = t.TempDir()
			if err := os.Mkdir(filepath.Join(o.SourceDir, "netpool"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "is not a regular file"},
		{"unknown datastore", func(t *testing.T, n *node, o *Options) { o.Flat.Datastore = "etcd" }, "the flat config would not load"},
		{"unknown log level", func(t *testing.T, n *node, o *Options) { o.Flat.LogLevel = "loud" }, "log_level"},
		{"relative bbolt path", func(t *testing.T, n *node, o *Options) {
			o.Flat.Datastore, o.Flat.BboltPath = ipam.DatastoreBbolt, "netpool.db"
		}, "bbolt.path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, []byte("plugin"))
			o := n.options(&FlatConfig{Datastore: ipam.DatastoreKubernetes})
			tc.edit(t, &n, &o)
			cs, err := Install(o)
			if err == nil || !strings.Contains(err.Error(), tc.error) {
				t.Fatalf("Install: %v, want an error containing %q", err, tc.error)
			}
			if len(cs) != 0 {
				t.Errorf("Install reported changes %+v with an error", cs)
			}
			if e := entries(t, n.bin); len(e) != 0 {
				t.Errorf("the bin dir holds %v after a refused install", e)
			}
			if e := entries(t, n.netd); len(e) != 0 {
				t.Errorf("the net dir holds %v after a refused install", e)
			}
		})
	}
}

// TestInstallReadOnlyHostPath: a host path mounted read-only gets an error that says so.
func TestInstallReadOnlyHostPath(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: mounting a read-only file system needs root (run as root, as CI does)")
	}
	n := newNode(t, []byte("plugin"))
	if err := syscall.Mount("tmpfs", n.bin, "tmpfs", syscall.MS_RDONLY, "size=1m"); err != nil {
		t.Fatalf("mounting a read-only tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(n.bin, syscall.MNT_DETACH) })
	_, err := Install(n.options(nil))
	if err == nil || !strings.Contains(err.Error(), "read-only file system: mount the host path read-write") {
		t.Fatalf("Install into a read-only bin dir: %v", err)
	}
	if e := entries(t, n.netd); len(e) != 0 {
		t.Errorf("net dir holds %v", e)
	}
}

// TestReplaceFileIsAtomicToExec runs the installed binary in a loop from another process while the
// installer replaces it again and again with two different binaries. Every exec must run one of
// them whole: an in-place write would make execs fail ("text file busy", "exec format error") or
// run a truncated file. The control shows that the loop does catch an in-place writer.
func TestReplaceFileIsAtomicToExec(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	v1, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	// A second, different binary: trailing bytes after an ELF image change nothing it runs.
	v2 := append(bytes.Clone(v1), bytes.Repeat([]byte{0}, 4096)...)
	dir := t.TempDir()
	dst := filepath.Join(dir, "netpool")
	if _, err := replaceFile(dst, v1, 0o755); err != nil {
		t.Fatal(err)
	}
	loop := startExecLoop(t, dst)
	// At least 40 replacements, and on until the loop has run the binary 20 times meanwhile (a
	// loaded machine runs it slowly), within a minute.
	replaced := 0
	for deadline := time.Now().Add(time.Minute); replaced < 40 || loop.started() < 20 && time.Now().Before(deadline); replaced++ {
		data := v1
		if replaced%2 == 1 {
			data = v2
		}
		if _, err := replaceFile(dst, data, 0o755); err != nil {
			t.Fatalf("replace %d: %v", replaced, err)
		}
	}
	runs, failures := loop.stop(t)
	if runs < 20 {
		t.Fatalf("only %d execs ran while the binary was replaced: the test proves nothing", runs)
	}
	if failures != "" {
		t.Fatalf("execs failed while the binary was replaced atomically:\n%s", failures)
	}
	if e := entries(t, dir); len(e) != 1 {
		t.Errorf("the directory holds %v, want only the binary", e)
	}
	t.Logf("%d execs during %d replacements, none failed", runs, replaced)

	t.Run("control: an in-place write is caught", func(t *testing.T) {
		loop := startExecLoop(t, dst)
		busy := 0
		for i := 0; i < 200 && busy == 0; i++ {
			if err := os.WriteFile(dst, v1, 0o755); err != nil {
				busy++ // ETXTBSY: the file is being executed
			}
		}
		runs, failures := loop.stop(t)
		if busy == 0 && failures == "" {
			t.Fatalf("%d execs and 200 in-place writes and nothing went wrong: the loop cannot see a torn binary", runs)
		}
	})
}
