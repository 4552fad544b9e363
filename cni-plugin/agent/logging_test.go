package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netpool/netpool/cni-plugin/agentproto"
	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/harness"
)

func TestNewLogger(t *testing.T) {
	var b bytes.Buffer
	log, err := NewLogger(&b, LogFormatJSON, "warn")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("Hidden at warn")
	log.Warn("Shown at warn", "k", "v")
	var line map[string]any
	if err := json.Unmarshal(b.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %q (%v)", b.String(), err)
	}
	if line["msg"] != "Shown at warn" || line["k"] != "v" {
		t.Errorf("line %v", line)
	}
	b.Reset()
	text, err := NewLogger(&b, LogFormatText, "debug")
	if err != nil {
		t.Fatal(err)
	}
	text.Debug("Shown at debug", "k", "v")
	if !strings.Contains(b.String(), `msg="Shown at debug" k=v`) {
		t.Errorf("text line %q", b.String())
	}
	for _, tt := range []struct{ format, level, want string }{
		{"xml", "info", `--log-format "xml": want json or text`},
		{LogFormatJSON, "loud", `--log-level "loud": want debug, verbose, info, warn, error or panic`},
		{LogFormatJSON, "WARN", `--log-level "WARN": want debug, verbose, info, warn, error or panic`},
		{LogFormatJSON, "", `--log-level "": want debug, verbose, info, warn, error or panic`},
	} {
		if _, err := NewLogger(&b, tt.format, tt.level); err == nil || err.Error() != tt.want {
			t.Errorf("NewLogger(%q, %q) = %v, want %q", tt.format, tt.level, err, tt.want)
		}
	}
}

// TestNewLoggerPluginWords: the agent takes the plugin's log_level words, verbose as info and
// panic as error.
func TestNewLoggerPluginWords(t *testing.T) {
	for level, shown := range map[string][]string{"verbose": {"info", "warn", "error"}, "panic": {"error"}} {
		var b bytes.Buffer
		log, err := NewLogger(&b, LogFormatText, level)
		if err != nil {
			t.Fatalf("--log-level=%s: %v", level, err)
		}
		log.Debug("at debug")
		log.Info("at info")
		log.Warn("at warn")
		log.Error("at error")
		var got []string
		for _, l := range []string{"debug", "info", "warn", "error"} {
			if strings.Contains(b.String(), `msg="at `+l+`"`) {
				got = append(got, l)
			}
		}
		if strings.Join(got, ",") != strings.Join(shown, ",") {
			t.Errorf("--log-level=%s logged %v, want %v", level, got, shown)
		}
	}
}

// logLines parses the JSON lines in b.
func logLines(t *testing.T, b *harness.SyncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// callLine returns the one "CNI call ..." line of containerID with verb.
func callLine(t *testing.T, lines []map[string]any, verb, containerID string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, l := range lines {
		if l["verb"] == verb && l["containerID"] == containerID {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d log lines for %s %s, want 1: %v", len(found), verb, containerID, lines)
	}
	return found[0]
}

// TestAgentLogsEveryCall runs ADD, CHECK, DEL and a failing ADD through an agent on a real API
// server: each is one line, at info on success and error on failure, with the pod, the
// interface, the address (ADD) and the latency.
func TestAgentLogsEveryCall(t *testing.T) {
	env := envtest.Start(t)
	var logs harness.SyncBuffer
	log, err := NewLogger(&logs, LogFormatJSON, "info")
	if err != nil {
		t.Fatal(err)
	}
	n := MustRun(t, env, "node-log", filepath.Join(socketDir(t), "a.sock"), Options{Log: log})
	sh := newShim()
	conf := netConf("logged", n.socket, `,"range":"10.71.0.0/28"`)
	args := "K8S_POD_NAMESPACE=shop;K8S_POD_NAME=cart-1"
	out, err := sh.call("ADD", "c-log", args, conf)
	if err != nil {
		t.Fatal(err)
	}
	ip := firstIP(t, out)
	if _, err := sh.call("DEL", "c-log", args, conf); err != nil {
		t.Fatal(err)
	}
	if _, err := sh.call("ADD", "c-bad", args, netConf("logged", n.socket, `,"pool":"no-such-pool"`)); err == nil {
		t.Fatal("ADD from a pool that does not exist succeeded")
	}

	lines := logLines(t, &logs)
	add := callLine(t, lines, agentproto.VerbAdd, "c-log")
	if add["level"] != "INFO" || add["msg"] != "CNI call served" || add["pod"] != "shop/cart-1" || add["ifName"] != "net1" || add["node"] != "node-log" {
		t.Errorf("ADD line %v", add)
	}
	if addrs, _ := add["addresses"].([]any); len(addrs) != 1 || !strings.HasPrefix(addrs[0].(string), ip+"/") {
		t.Errorf("ADD line addresses %v, want [%s/28]", add["addresses"], ip)
	}
	if lat, ok := add["latency"].(float64); !ok || lat <= 0 {
		t.Errorf("ADD line latency %v, want a positive duration", add["latency"])
	}
	del := callLine(t, lines, agentproto.VerbDel, "c-log")
	if del["level"] != "INFO" || del["pod"] != "shop/cart-1" || del["addresses"] != nil {
		t.Errorf("DEL line %v", del)
	}
	bad := callLine(t, lines, agentproto.VerbAdd, "c-bad")
	if bad["level"] != "ERROR" || bad["msg"] != "CNI call failed" || bad["code"] != float64(7) || !strings.Contains(fmt.Sprint(bad["err"]), "no-such-pool") {
		t.Errorf("failed ADD line %v", bad)
	}
}
