package agent

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netpool/netpool/cni-plugin/agentproto"
)

// confinedAgent is an Agent with only what the file rules need: a call whose config fails to load
// never reaches the store.
func confinedAgent(t *testing.T) (*Agent, string, string) {
	t.Helper()
	root := t.TempDir()
	confDir, logDir := filepath.Join(root, "net.d"), filepath.Join(root, "log")
	for _, d := range []string{confDir, logDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return &Agent{opts: Options{ConfigDirs: []string{confDir}, LogDirs: []string{logDir}}, log: slog.New(slog.DiscardHandler), metrics: newMetrics()}, confDir, logDir
}

// TestAgentConfinesConfigurationPath: the agent runs as root with cluster credentials, so a NAD's
// configuration_path is read only inside the config directories, and a path that escapes them
// (directly, by "..", or by a link planted inside) is code 7 without a byte of the file.
func TestAgentConfinesConfigurationPath(t *testing.T) {
	a, confDir, _ := confinedAgent(t)
	outside := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(outside, []byte(`{"SECRET":"x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(confDir, "planted.conf")); err != nil {
		t.Fatal(err)
	}
	inside := filepath.Join(confDir, "netpool.conf")
	if err := os.WriteFile(inside, []byte(`{"network_name":"blue"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := a.readConfig(inside); err != nil || !strings.Contains(string(b), "blue") {
		t.Fatalf("reading %s inside the config directory: %q, %v", inside, b, err)
	}
	for _, path := range []string{outside, filepath.Join(confDir, "planted.conf"), confDir + "/../../" + filepath.Base(filepath.Dir(outside)) + "/secret.json", "/etc/shadow"} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			stdin := []byte(`{"cniVersion":"1.1.0","name":"net1","ipam":{"type":"netpool","datastore":"kubernetes","range":"10.5.0.0/24","configuration_path":"` + path + `"}}`)
			resp := a.Handle(context.Background(), &agentproto.Request{Verb: agentproto.VerbAdd, ContainerID: "c1", IfName: "net1", Stdin: stdin})
			if resp.Error == nil || resp.Error.Code != types.ErrInvalidNetworkConfig || !strings.Contains(resp.Error.Msg, "outside the directories the netpool agent serves") {
				t.Fatalf("ADD with configuration_path %s = %+v, want code 7 saying it is outside", path, resp.Error)
			}
			if strings.Contains(resp.Error.Msg, "SECRET") {
				t.Errorf("the error echoes the file: %s", resp.Error.Msg)
			}
		})
	}
	// A default path outside the directories is absent, not an error.
	if _, err := a.readConfig("/etc/kubernetes/cni/net.d/whereabouts.d/whereabouts.conf"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a default path outside the directories = %v, want fs.ErrNotExist", err)
	}
}

// TestAgentConfinesLogFile: the agent writes a NAD's log_file only inside its log directory.
func TestAgentConfinesLogFile(t *testing.T) {
	a, _, logDir := confinedAgent(t)
	w, err := a.openLog(filepath.Join(logDir, "net1.log"))
	if err != nil {
		t.Fatalf("log_file inside the log directory: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.Symlink(victim, filepath.Join(logDir, "planted.log")); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{victim, "/etc/cron.d/netpool", logDir + "/../escape.log", filepath.Join(logDir, "planted.log"), "relative.log"} {
		if w, err := a.openLog(path); err == nil {
			_ = w.Close()
			t.Errorf("log_file %s was opened", path)
		}
	}
	for _, p := range []string{victim, filepath.Join(filepath.Dir(logDir), "escape.log")} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was created: %v", p, err)
		}
	}
}

// TestExtraDirs: --extra-config-dir and --extra-log-dir add directories to the defaults (a k3s
// node's flat file is read, the defaults still are), and a relative directory or "/" is refused.
func TestExtraDirs(t *testing.T) {
	root := t.TempDir()
	rancher, logs := filepath.Join(root, "var/lib/rancher/k3s/agent/etc/cni/net.d"), filepath.Join(root, "logs")
	for _, d := range []string{filepath.Join(rancher, "whereabouts.d"), logs} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	flat := filepath.Join(rancher, "whereabouts.d", "whereabouts.conf")
	if err := os.WriteFile(flat, []byte(`{"datastore":"kubernetes","kubernetes":{"kubeconfig":"/k"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	configDirs, logDirs, err := Flags{ExtraConfigDirs: []string{rancher}, ExtraLogDirs: []string{logs}}.Dirs()
	if err != nil {
		t.Fatal(err)
	}
	if want := append(append([]string{}, DefaultConfigDirs...), rancher); strings.Join(configDirs, ",") != strings.Join(want, ",") ||
		strings.Join(logDirs, ",") != DefaultLogDir+","+logs {
		t.Fatalf("Dirs() = %v, %v; want the defaults and then the extra ones", configDirs, logDirs)
	}
	a := &Agent{opts: Options{ConfigDirs: configDirs, LogDirs: logDirs}, log: slog.New(slog.DiscardHandler), metrics: newMetrics()}
	if b, err := a.readConfig(flat); err != nil || !strings.Contains(string(b), "kubeconfig") {
		t.Errorf("the flat file in the extra directory: %q, %v", b, err)
	}
	w, err := a.openLog(filepath.Join(logs, "net1.log"))
	if err != nil {
		t.Fatalf("log_file in the extra log directory: %v", err)
	}
	_ = w.Close()
	// Without the flag the same file is refused, as before.
	plain, _, err := Flags{}.Dirs()
	if err != nil {
		t.Fatal(err)
	}
	b := &Agent{opts: Options{ConfigDirs: plain, LogDirs: []string{DefaultLogDir}}, log: slog.New(slog.DiscardHandler), metrics: newMetrics()}
	if _, err := b.readConfig(flat); err == nil || !strings.Contains(err.Error(), "outside the directories the netpool agent serves") {
		t.Errorf("without --extra-config-dir: %v, want it refused", err)
	}
	for _, bad := range []Flags{{ExtraConfigDirs: []string{"relative/dir"}}, {ExtraLogDirs: []string{"/"}}, {ExtraConfigDirs: []string{"//"}}} {
		if _, _, err := bad.Dirs(); err == nil || !strings.Contains(err.Error(), "want an absolute directory other than /") {
			t.Errorf("Dirs() of %+v = %v, want refused", bad, err)
		}
	}
}
