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
	return &Agent{opts: Options{ConfigDirs: []string{confDir}, LogDir: logDir}, log: slog.New(slog.DiscardHandler), metrics: newMetrics()}, confDir, logDir
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
