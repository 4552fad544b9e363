package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netpool/netpool/internal/version"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRoot(&out, &errOut)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestInstallCNICommand(t *testing.T) {
	src, bin, netd := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "netpool"), []byte("plugin"), 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"install-cni", "--source-dir", src, "--cni-bin-dir", bin, "--net-dir", netd, "--log-level", "info"}
	out, err := run(t, args...)
	want := "installed " + filepath.Join(bin, "netpool") + "\ninstalled " + filepath.Join(netd, "netpool.d", "netpool.conf") + "\n"
	if err != nil || out != want {
		t.Fatalf("first run: %q, %v; want %q", out, err, want)
	}
	out, err = run(t, args...)
	if err != nil || strings.Count(out, "unchanged ") != 2 {
		t.Fatalf("second run: %q, %v; want both unchanged", out, err)
	}
	flat, err := os.ReadFile(filepath.Join(netd, "netpool.d", "netpool.conf"))
	if err != nil || !strings.Contains(string(flat), `"agent_socket": "/run/netpool/agent.sock"`) || !strings.Contains(string(flat), `"log_level": "info"`) {
		t.Fatalf("flat file %s, %v", flat, err)
	}

	t.Run("--no-flat-config writes the binaries only", func(t *testing.T) {
		netd2 := t.TempDir()
		out, err := run(t, "install-cni", "--source-dir", src, "--cni-bin-dir", bin, "--net-dir", netd2, "--no-flat-config")
		if err != nil || out != "unchanged "+filepath.Join(bin, "netpool")+"\n" {
			t.Fatalf("%q, %v", out, err)
		}
		if es, _ := os.ReadDir(netd2); len(es) != 0 {
			t.Fatalf("net dir holds %d entries", len(es))
		}
	})
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--datastore", "etcd"}, `datastore "etcd"`},
		{[]string{"--lock-timeout", "soon"}, `invalid argument "soon"`},
		{[]string{"extra"}, `unknown command "extra"`},
	} {
		t.Run("refuses "+strings.Join(bad.args, " "), func(t *testing.T) {
			netd3 := t.TempDir()
			args := append([]string{"install-cni", "--source-dir", src, "--cni-bin-dir", t.TempDir(), "--net-dir", netd3}, bad.args...)
			if _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Fatalf("%v: %v, want an error containing %q", bad.args, err, bad.want)
			}
			if es, _ := os.ReadDir(netd3); len(es) != 0 {
				t.Fatalf("a refused install wrote %d entries", len(es))
			}
		})
	}
}

// TestVersion: the version command and --version print the stamped version.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := run(t, args...)
		if err != nil || out != "netpoolctl "+version.String()+"\n" {
			t.Errorf("netpoolctl %v = %q, %v; want %q", args, out, err, "netpoolctl "+version.String())
		}
	}
	if _, err := run(t, "version", "extra"); err == nil {
		t.Error("version with an argument succeeded")
	}
}
