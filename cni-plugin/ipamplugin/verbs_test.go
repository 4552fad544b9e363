package ipamplugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/netpool/netpool/allocator/boltstore"
)

// harness runs the verbs in-process, with stdout and stderr captured and no flat config file.
type harness struct {
	t      *testing.T
	plugin *Plugin
	out    *bytes.Buffer
	log    *bytes.Buffer
	db     string
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, out: &bytes.Buffer{}, log: &bytes.Buffer{}, db: filepath.Join(t.TempDir(), "np.db")}
	h.plugin = &Plugin{
		ReadFile:  func(p string) ([]byte, error) { return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist) },
		OpenStore: OpenStore,
		Stdout:    h.out,
		Stderr:    h.log,
	}
	return h
}

func (h *harness) conf(ipamExtra, top string) []byte {
	return []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"net1"%s,"ipam":{"type":"netpool","bbolt":{"path":%q,"lock_timeout":"200ms"}%s}}`, top, h.db, ipamExtra))
}

func (h *harness) run(verb func(*skel.CmdArgs) error, id string, stdin []byte) error {
	h.out.Reset()
	return verb(&skel.CmdArgs{ContainerID: id, IfName: "eth0", Netns: "/var/run/netns/x", StdinData: stdin})
}

func wantCode(t *testing.T, err error, code uint, msg string) {
	t.Helper()
	var e *types.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not a CNI error", err)
	}
	if e.Code != code || !strings.Contains(e.Msg, msg) {
		t.Fatalf("error = code %d %q, want code %d containing %q", e.Code, e.Msg, code, msg)
	}
}

func TestAddResultShape(t *testing.T) {
	h := newHarness(t)
	f := h.plugin.Funcs()
	stdin := h.conf(`,"range":"10.5.0.0/24","gateway":"10.5.0.1","routes":[{"dst":"0.0.0.0/0"}],"dns":{"nameservers":["10.5.0.53"]},"ipRanges":[{"range":"fd05::/64"}]`, "")
	if err := h.run(f.Add, "c1", stdin); err != nil {
		t.Fatal(err)
	}
	var res struct {
		CNIVersion string `json:"cniVersion"`
		IPs        []struct{ Address, Gateway string }
		Routes     []struct{ Dst string }
		DNS        struct{ Nameservers []string }
		Interfaces []any `json:"interfaces"`
	}
	if err := json.Unmarshal(h.out.Bytes(), &res); err != nil {
		t.Fatalf("result %q: %v", h.out, err)
	}
	if res.CNIVersion != "1.1.0" || len(res.IPs) != 2 || res.IPs[0].Address != "10.5.0.2/24" || res.IPs[0].Gateway != "10.5.0.1" ||
		res.IPs[1].Address != "fd05::1/64" || res.IPs[1].Gateway != "" || res.Routes[0].Dst != "0.0.0.0/0" ||
		res.DNS.Nameservers[0] != "10.5.0.53" || res.Interfaces != nil {
		t.Errorf("result = %s", h.out)
	}
	// An older config version gets the result converted down.
	old := bytes.Replace(stdin, []byte(`"1.1.0"`), []byte(`"0.3.1"`), 1)
	if err := h.run(f.Add, "c1", old); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.out.String(), `"cniVersion": "0.3.1"`) || !strings.Contains(h.out.String(), `"version": "4"`) {
		t.Errorf("0.3.1 result = %s", h.out)
	}
}

func TestCheckUsesPrevResult(t *testing.T) {
	h := newHarness(t)
	f := h.plugin.Funcs()
	stdin := h.conf(`,"range":"10.5.0.0/24"`, "")
	if err := h.run(f.Add, "c1", stdin); err != nil {
		t.Fatal(err)
	}
	good := h.conf(`,"range":"10.5.0.0/24"`, `,"prevResult":{"cniVersion":"1.1.0","ips":[{"address":"10.5.0.1/24"}]}`)
	if err := h.run(f.Check, "c1", good); err != nil {
		t.Errorf("CHECK = %v", err)
	}
	bad := h.conf(`,"range":"10.5.0.0/24"`, `,"prevResult":{"cniVersion":"1.1.0","ips":[{"address":"10.5.0.9/24"}]}`)
	wantCode(t, h.run(f.Check, "c1", bad), CodeCheckFailed, "10.5.0.9 is in the result of c1/eth0 but not allocated to it")
	wantCode(t, h.run(f.Check, "c1", stdin), types.ErrInvalidNetworkConfig, "CHECK needs a prevResult")
}

func TestGCAcceptsBothAttachmentKeys(t *testing.T) {
	h := newHarness(t)
	f := h.plugin.Funcs()
	stdin := h.conf(`,"range":"10.5.0.0/24"`, "")
	for _, id := range []string{"a", "b", "c"} {
		if err := h.run(f.Add, id, stdin); err != nil {
			t.Fatal(err)
		}
	}
	gc := h.conf(`,"range":"10.5.0.0/24"`, `,"cni.dev/valid-attachments":[{"containerID":"a","ifname":"eth0"}],"cni.dev/attachments":[{"containerID":"b","ifname":"eth0"}]`)
	if err := h.run(f.GC, "", gc); err != nil {
		t.Fatal(err)
	}
	prev := func(ip string) []byte {
		return h.conf(`,"range":"10.5.0.0/24"`, `,"prevResult":{"cniVersion":"1.1.0","ips":[{"address":"`+ip+`/24"}]}`)
	}
	if err := h.run(f.Check, "a", prev("10.5.0.1")); err != nil {
		t.Errorf("a was valid: %v", err)
	}
	if err := h.run(f.Check, "b", prev("10.5.0.2")); err != nil {
		t.Errorf("b was valid (legacy key): %v", err)
	}
	wantCode(t, h.run(f.Check, "c", prev("10.5.0.3")), CodeCheckFailed, "c/eth0 holds no address")
	wantCode(t, h.run(f.GC, "", h.conf(`,"range":"10.5.0.0/24"`, `,"cni.dev/valid-attachments":"nope"`)), types.ErrInvalidNetworkConfig, "failed to parse GC arguments")
}

// TestErrorCodes covers every error path of the verbs: each gets its documented code and a message
// naming the value, and none changes state (the final STATUS and ADD still work).
func TestErrorCodes(t *testing.T) {
	h := newHarness(t)
	f := h.plugin.Funcs()
	tiny := `,"range":"10.6.0.0/30"` // capacity 2
	if err := h.run(f.Add, "c1", h.conf(tiny, `,"runtimeConfig":{"ips":["10.6.0.1"]}`)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		verb  func(*skel.CmdArgs) error
		id    string
		stdin []byte
		code  uint
		msg   string
	}{
		{"bad range", f.Add, "c2", h.conf(`,"range":"10.6.0.0/33"`, ""), types.ErrInvalidNetworkConfig, `ipam.range "10.6.0.0/33": not a CIDR`},
		{"bad config on DEL", f.Del, "c2", h.conf(`,"range":"x"`, ""), types.ErrInvalidNetworkConfig, `ipam.range "x"`},
		{"bad config on STATUS", f.Status, "", h.conf(`,"range":"x"`, ""), types.ErrInvalidNetworkConfig, `ipam.range "x"`},
		{"address in use", f.Add, "c2", h.conf(tiny, `,"runtimeConfig":{"ips":["10.6.0.1"]}`), CodeAddressInUse, "10.6.0.1 in pool 10.6.0.0/30 is held by c1/eth0"},
		{"address not allowed", f.Add, "c2", h.conf(tiny, `,"runtimeConfig":{"ips":["10.6.0.3"]}`), CodeAddressNotAllowed, "10.6.0.3 is the network or broadcast address"},
		{"attachment conflict", f.Add, "c1", h.conf(tiny, `,"runtimeConfig":{"ips":["10.6.0.2"]}`), CodeAttachmentConflict, "c1/eth0 holds 10.6.0.1"},
		{"kubernetes reaching a Plugin that does not forward", f.Add, "c2", h.conf(tiny+`,"datastore":"kubernetes","kubernetes":{"kubeconfig":"/k"}`, ""), CodeDatastoreNotServed, `"kubernetes" is served by the netpool agent`},
		{"unusable store", f.Add, "c2", []byte(`{"cniVersion":"1.1.0","name":"n","ipam":{"range":"10.6.0.0/30","bbolt":{"path":"/proc/version/x.db"}}}`), CodeStoreUnusable, "/proc/version"},
		{"unusable store on STATUS", f.Status, "", []byte(`{"cniVersion":"1.1.0","name":"n","ipam":{"range":"10.6.0.0/30","bbolt":{"path":"/proc/version/x.db"}}}`), types.ErrPluginNotAvailable, "/proc/version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCode(t, h.run(tt.verb, tt.id, tt.stdin), tt.code, tt.msg)
			if h.out.Len() != 0 {
				t.Errorf("an error path wrote %q to stdout", h.out)
			}
		})
	}
	// Fill the pool: ADD fails with 100 and STATUS with 50; then nothing else changed.
	if err := h.run(f.Add, "c2", h.conf(tiny, "")); err != nil {
		t.Fatal(err)
	}
	wantCode(t, h.run(f.Add, "c3", h.conf(tiny, "")), CodePoolExhausted, "no free address in pool 10.6.0.0/30")
	wantCode(t, h.run(f.Status, "", h.conf(tiny, "")), types.ErrPluginNotAvailable, "no free address in pool 10.6.0.0/30")
	if err := h.run(f.Del, "c2", h.conf(tiny, "")); err != nil {
		t.Fatal(err)
	}
	if err := h.run(f.Status, "", h.conf(tiny, "")); err != nil {
		t.Errorf("STATUS after DEL = %v", err)
	}
}

func TestBusyStoreIsTryAgainLater(t *testing.T) {
	h := newHarness(t)
	s, err := boltstore.Open(h.db, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f := h.plugin.Funcs()
	for name, verb := range map[string]func(*skel.CmdArgs) error{"ADD": f.Add, "DEL": f.Del, "STATUS": f.Status} {
		start := time.Now()
		wantCode(t, h.run(verb, "c1", h.conf(`,"range":"10.7.0.0/24"`, "")), types.ErrTryAgainLater, "is held by another process")
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s waited %v on a 200ms lock timeout", name, d)
		}
	}
}

func TestLogsGoToLogFile(t *testing.T) {
	h := newHarness(t)
	logFile := filepath.Join(t.TempDir(), "np.log")
	stdin := h.conf(fmt.Sprintf(`,"range":"10.8.0.0/24","log_file":%q,"log_level":"debug"`, logFile), "")
	if err := h.run(h.plugin.Funcs().Add, "c1", stdin); err != nil {
		t.Fatal(err)
	}
	b, err := readFile(logFile)
	if err != nil || !strings.Contains(string(b), `msg=Allocated`) || !strings.Contains(string(b), "address=10.8.0.1") {
		t.Errorf("log file = %q (%v)", b, err)
	}
	if h.log.Len() != 0 {
		t.Errorf("stderr got %q although log_file is set", h.log)
	}
}
