package ipam

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func netConf(ipam string) []byte {
	return []byte(`{"cniVersion":"1.1.0","name":"net1","ipam":` + ipam + `}`)
}

func TestLoadDefaults(t *testing.T) {
	c, err := Load(netConf(`{"type":"netpool","range":"10.1.0.0/24"}`), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Datastore != DatastoreBbolt || c.BboltPath != DefaultBboltPath || c.LockTimeout != DefaultLockTimeout {
		t.Errorf("store defaults = %q %q %v", c.Datastore, c.BboltPath, c.LockTimeout)
	}
	if !c.EnableOverlappingRanges || c.OverlappingRangesSet {
		t.Error("enable_overlapping_ranges must default to true, as in whereabouts, and not count as set")
	}
	if c.Name != "net1" || c.CNIVersion != "1.1.0" || len(c.Ranges) != 1 {
		t.Errorf("config = %+v", c)
	}
}

func TestLoadWhereaboutsNAD(t *testing.T) {
	// A whereabouts NAD's ipam section with "type" changed, including fields netpool ignores.
	c, err := Load(netConf(`{
		"type": "netpool", "range": "192.168.2.225-192.168.2.230/28", "exclude": ["192.168.2.229/32"],
		"gateway": "192.168.2.225", "routes": [{"dst": "0.0.0.0/0"}], "dns": {"nameservers": ["1.1.1.1"]},
		"network_name": "blue", "enable_overlapping_ranges": false,
		"ipRanges": [{"range": "fd00:2::/64", "range_start": "fd00:2::10", "exclude": ["fd00:2::11"]}],
		"log_file": "/tmp/x.log", "log_level": "debug", "leader_lease_duration": 1500, "sleep_for_race": 1,
		"datastore": "bbolt", "bbolt": {"path": "/tmp/np.db", "lock_timeout": "3s"}
	}`), "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_UID=u-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Ranges) != 2 || c.Ranges[0].Subnet.String() != "192.168.2.224/28" || c.Ranges[1].Start != mustAddr("fd00:2::10") {
		t.Fatalf("ranges = %+v", c.Ranges)
	}
	if got := c.Ranges[0].Capacity().String(); got != "4" { // .225-.230 less the gateway and .229
		t.Errorf("capacity = %s, want 4", got)
	}
	if c.NetworkName != "blue" || c.EnableOverlappingRanges || !c.OverlappingRangesSet || c.LockTimeout != 3*time.Second || c.LogLevel != "debug" {
		t.Errorf("config = %+v", c)
	}
	if c.Pod != (PodRef{Namespace: "ns1", Name: "pod1", UID: "u-1"}) {
		t.Errorf("pod = %+v", c.Pod)
	}
	if len(c.Routes) != 1 || c.Routes[0].Dst.String() != "0.0.0.0/0" || c.DNS.Nameservers[0] != "1.1.1.1" {
		t.Errorf("routes/dns = %v %v", c.Routes, c.DNS)
	}
	if c.PoolKey(0) != "blue/192.168.2.224/28" || c.PoolKey(1) != "blue/fd00:2::/64" {
		t.Errorf("pool keys = %s %s", c.PoolKey(0), c.PoolKey(1))
	}
}

func TestPoolKeyIgnoresCNINetworkName(t *testing.T) {
	a, err := Load([]byte(`{"name":"a","ipam":{"type":"netpool","range":"10.0.0.0/24","range_start":"10.0.0.10"}}`), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load([]byte(`{"name":"b","ipam":{"type":"netpool","range":"10.0.0.0/24"}}`), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.PoolKey(0) != b.PoolKey(0) {
		t.Errorf("two NADs with the same range and no network_name must share a pool: %s vs %s", a.PoolKey(0), b.PoolKey(0))
	}
}

func TestRequestedAddresses(t *testing.T) {
	conf := []byte(`{"name":"n","runtimeConfig":{"ips":["10.0.0.5/24"]},"args":{"cni":{"ips":["fd00::5"]}},
		"ipam":{"type":"netpool","range":"10.0.0.0/24","ipRanges":[{"range":"fd00::/64"}]}}`)
	c, err := Load(conf, "IP=10.0.0.5/24", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{mustAddr("10.0.0.5"), mustAddr("fd00::5")}
	if fmt.Sprint(c.Requested) != fmt.Sprint(want) {
		t.Errorf("requested = %v, want %v (de-duplicated across sources)", c.Requested, want)
	}
}

func TestFlatFile(t *testing.T) {
	files := map[string]string{
		"/etc/cni/net.d/whereabouts.d/whereabouts.conf": `{"datastore":"bbolt","bbolt":{"path":"/flat.db"},"log_level":"error","range":"10.9.0.0/24"}`,
		"/custom.conf": `{"bbolt":{"path":"/custom.db"}}`,
	}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, fmt.Errorf("open %s: %w", p, fs.ErrNotExist)
	}
	c, err := Load(netConf(`{"type":"netpool","range":"10.1.0.0/24","log_level":"debug"}`), "", read)
	if err != nil {
		t.Fatal(err)
	}
	if c.BboltPath != "/flat.db" || c.LogLevel != "debug" || c.Ranges[0].Subnet.String() != "10.1.0.0/24" {
		t.Errorf("flat defaults / inline wins: path=%s level=%s range=%s", c.BboltPath, c.LogLevel, c.Ranges[0].Subnet)
	}
	c, err = Load(netConf(`{"type":"netpool","range":"10.1.0.0/24","configuration_path":"/custom.conf"}`), "", read)
	if err != nil {
		t.Fatal(err)
	}
	if c.BboltPath != "/custom.db" {
		t.Errorf("configuration_path not used: %s", c.BboltPath)
	}
	_, err = Load(netConf(`{"type":"netpool","range":"10.1.0.0/24","configuration_path":"/missing.conf"}`), "", read)
	if err == nil || !strings.Contains(err.Error(), `configuration_path "/missing.conf": cannot be read`) ||
		!errors.Is(err, ErrInvalidConfig) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing configuration_path: %v, want an invalid config caused by fs.ErrNotExist", err)
	}
}

// TestConfigErrorCause: a config error made from another error keeps it as its cause, so callers
// can tell a syntax error or a failed read apart without matching text.
func TestConfigErrorCause(t *testing.T) {
	_, err := Load([]byte(`{"name":`), "", nil)
	var syntax *json.SyntaxError
	var cfgErr *ConfigError
	if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &syntax) || !errors.As(err, &cfgErr) ||
		cfgErr.Field != "network config" || cfgErr.Cause == nil || !strings.Contains(err.Error(), "not valid JSON: "+syntax.Error()) {
		t.Errorf("Load of broken JSON = %v, want a ConfigError of the network config caused by a *json.SyntaxError", err)
	}
	_, err = Load(netConf(`{"type":"netpool","range":7}`), "", nil)
	var typeErr *json.UnmarshalTypeError
	if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &typeErr) {
		t.Errorf("Load of a range that is a number = %v, want a ConfigError caused by a *json.UnmarshalTypeError", err)
	}
	_, err = Load(netConf(`{"type":"netpool"}`), "", nil)
	if !errors.As(err, &cfgErr) || cfgErr.Cause != nil || len(cfgErr.Unwrap()) != 1 {
		t.Errorf("Load without a range = %v (cause %v), want a ConfigError with no cause", err, cfgErr.Cause)
	}
	_, err = FromNetworkConfig([]byte(`[`))
	if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &syntax) {
		t.Errorf("FromNetworkConfig of broken JSON = %v, want a cause of *json.SyntaxError", err)
	}
}

func TestLoadKubernetes(t *testing.T) {
	// kubernetes.kubeconfig selects the datastore (a whereabouts NAD keeps working); the node agent
	// holds the credentials, so the plugin neither needs nor reads the file.
	c, err := Load(netConf(`{"type":"netpool","range":"10.1.0.0/24","kubernetes":{"kubeconfig":"/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig"}}`), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Datastore != DatastoreKubernetes || c.AgentSocket != DefaultAgentSocket || c.Pool != "" {
		t.Errorf("datastore = %q, agent socket = %q, pool = %q", c.Datastore, c.AgentSocket, c.Pool)
	}
	c, err = Load(netConf(`{"type":"netpool","range":"10.1.0.0/24","datastore":"kubernetes","kubernetes":{"agent_socket":"/run/np/node-b.sock"}}`), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.AgentSocket != "/run/np/node-b.sock" || c.Kubeconfig != "" {
		t.Errorf("agent socket = %q, kubeconfig = %q", c.AgentSocket, c.Kubeconfig)
	}
	// A pool reference leaves the range to the store; requested addresses wait for it too.
	c, err = Load([]byte(`{"name":"n","runtimeConfig":{"ips":["10.9.0.5/24"]},"ipam":{"type":"netpool","datastore":"kubernetes","pool":"blue.pools-1"}}`), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Pool != "blue.pools-1" || len(c.Ranges) != 0 || fmt.Sprint(c.Requested) != "[10.9.0.5]" {
		t.Errorf("pool = %q, ranges = %v, requested = %v", c.Pool, c.Ranges, c.Requested)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name, conf, args, want string
	}{
		{"not JSON", `{`, "", "network config: not valid JSON"},
		{"no ipam", `{"name":"x"}`, "", "the network config has no ipam section"},
		{"ipam not an object", `{"ipam":[1]}`, "", "ipam: must be a JSON object"},
		{"no range", `{"ipam":{"type":"netpool"}}`, "", "range: no range: set range or ipRanges"},
		{"typo of range_start", `{"ipam":{"type":"netpool","range":"10.0.0.0/24","range_star":"10.0.0.9"}}`, "", `ipam "range_star": unknown field`},
		{"bad gateway", `{"ipam":{"type":"netpool","range":"10.0.0.0/24","gateway":"10.0.0"}}`, "", `gateway "10.0.0": not an IP address`},
		{"gateway outside", `{"ipam":{"type":"netpool","range":"10.0.0.0/24","gateway":"10.0.1.1"}}`, "", `gateway "10.0.1.1": is not inside any range (10.0.0.0/24)`},
		{"bad ipRanges entry", `{"ipam":{"type":"netpool","ipRanges":[{"range":"10.0.0.0/24"},{"range":"nope"}]}}`, "", `ipRanges[1].range "nope": not a CIDR`},
		{"overlapping ranges", `{"ipam":{"type":"netpool","range":"10.0.0.0/16","ipRanges":[{"range":"10.0.5.0/24"}]}}`, "", `ipRanges[0].range "10.0.5.0/24": overlaps ipam (10.0.0.0/16)`},
		{"bad datastore", `{"ipam":{"type":"netpool","range":"10.0.0.0/24","datastore":"etcd"}}`, "", `datastore "etcd": want "bbolt" or "kubernetes"`},
		{"relative agent socket", `{"ipam":{"type":"netpool","range":"10.0.0.0/24","datastore":"kubernetes","kubernetes":{"agent_socket":"agent.sock"}}}`, "", `kubernetes.agent_socket "agent.sock": must be an absolute path`},
		{"pool without kubernetes", `{"ipam":{"type":"netpool","pool":"blue"}}`, "", `pool "blue": a pool reference needs datastore "kubernetes"`},
		{"pool name invalid", `{"ipam":{"type":"netpool","datastore":"kubernetes","pool":"Blue_1"}}`, "", `pool "Blue_1": not a valid IPPool name`},
		{"pool and range", `{"ipam":{"type":"netpool","datastore":"kubernetes","pool":"blue","range":"10.0.0.0/24"}}`, "", `pool "blue": the pool defines the range`},
		{"pool and gateway", `{"ipam":{"type":"netpool","datastore":"kubernetes","pool":"blue","gateway":"10.0.0.1"}}`, "", `pool "blue": the pool defines the range`},
		{"pool and bad requested ip", `{"runtimeConfig":{"ips":["x"]},"ipam":{"type":"netpool","datastore":"kubernetes","pool":"blue"}}`, "", `runtimeConfig.ips "x": not an IP address`},
		{"relative bbolt path", `{"ipam":{"type":"netpool","range":"10.0.0.0/24","bbolt":{"path":"x.db"}}}`, "", `bbolt.path "x.db": must be an absolute path`},
		{"bad lock timeout", `{"ipam":{"type":"netpool","range":"10.0.0.0/24","bbolt":{"lock_timeout":"-1s"}}}`, "", `bbolt.lock_timeout "-1s": want a positive duration`},
		{"bad log level", `{"ipam":{"type":"netpool","range":"10.0.0.0/24","log_level":"loud"}}`, "", `log_level "loud": want one of debug, verbose, info, warn, error or panic`},
		{"log level in capitals", `{"ipam":{"type":"netpool","range":"10.0.0.0/24","log_level":"DEBUG"}}`, "", `log_level "DEBUG": want one of`},
		{"wrong type of field", `{"ipam":{"type":"netpool","range":24}}`, "", `ipam: json: cannot unmarshal number`},
		{"bad runtimeConfig ip", `{"runtimeConfig":{"ips":["10.0.0.300"]},"ipam":{"type":"netpool","range":"10.0.0.0/24"}}`, "", `runtimeConfig.ips "10.0.0.300": not an IP address`},
		{"bad args ip", `{"args":{"cni":{"ips":["x"]}},"ipam":{"type":"netpool","range":"10.0.0.0/24"}}`, "", `args.cni.ips "x": not an IP address`},
		{"bad CNI_ARGS ip", `{"ipam":{"type":"netpool","range":"10.0.0.0/24"}}`, "IP=10.0.0.5/99", `CNI_ARGS IP "10.0.0.5/99": not an IP address`},
		{"malformed CNI_ARGS", `{"ipam":{"type":"netpool","range":"10.0.0.0/24"}}`, "K8S_POD_NAME", `CNI_ARGS "K8S_POD_NAME": want KEY=VALUE`},
		{"requested outside every range", `{"runtimeConfig":{"ips":["10.9.0.5"]},"ipam":{"type":"netpool","range":"10.0.0.0/24"}}`, "", `requested IP "10.9.0.5": is not inside any range (10.0.0.0/24)`},
		{"two requested in one range", `{"runtimeConfig":{"ips":["10.0.0.5","10.0.0.6"]},"ipam":{"type":"netpool","range":"10.0.0.0/24"}}`, "", `requested IP "10.0.0.6": and 10.0.0.5 are both in range 10.0.0.0/24`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load([]byte(tt.conf), tt.args, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
		})
	}
}

func TestIsDNSSubdomain(t *testing.T) {
	for s, want := range map[string]bool{
		"pool": true, "10.0.0.0-24": true, "a.b-c.d": true, "blue-fd00--64": true,
		"": false, "Pool": false, "-a": false, "a-": false, "a..b": false, ".a": false, "a_b": false,
		strings.Repeat("a", 253): true, strings.Repeat("a", 254): false,
	} {
		if got := isDNSSubdomain(s); got != want {
			t.Errorf("isDNSSubdomain(%q) = %v, want %v", s, got, want)
		}
	}
}
