package ipam

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

// Datastore names.
const (
	DatastoreBbolt      = "bbolt"
	DatastoreKubernetes = "kubernetes"
)

// DefaultBboltPath is where the embedded store lives when bbolt.path is not set. /var/lib/cni is
// where host-local keeps its state, so it survives reboots and is already on every node's backups.
const DefaultBboltPath = "/var/lib/cni/netpool/netpool.db"

// DefaultAgentSocket is the node agent's unix socket when kubernetes.agent_socket is not set. The
// plugin forwards every datastore kubernetes call there; /run is where node daemons put sockets.
const DefaultAgentSocket = "/run/netpool/agent.sock"

// DefaultLockTimeout bounds how long an invocation waits for the store's file lock before it fails
// with CNI error 11 (try again later), so a wedged peer can never hang the runtime.
const DefaultLockTimeout = 10 * time.Second

// DefaultFlatConfigPaths are searched, in order, for the global flat configuration file when
// configuration_path is not set; the whereabouts paths come after netpool's own so that a node
// migrating from whereabouts keeps working.
var DefaultFlatConfigPaths = []string{
	"/etc/cni/net.d/netpool.d/netpool.conf",
	// Multus' thick DaemonSet mounts the host's /etc/cni/net.d at /host/etc/cni/net.d in the
	// container where it runs delegates.
	"/host/etc/cni/net.d/netpool.d/netpool.conf",
	"/etc/kubernetes/cni/net.d/whereabouts.d/whereabouts.conf",
	"/etc/cni/net.d/whereabouts.d/whereabouts.conf",
}

// Config is a validated IPAM configuration with every default applied.
type Config struct {
	// CNIVersion and Name come from the network configuration around the ipam section.
	CNIVersion string
	Name       string
	// Ranges are allocated from in order; ADD takes one address from each (dual stack).
	Ranges []Range
	Routes []*types.Route
	DNS    types.DNS
	// NetworkName scopes pools: two configs with the same range and network name share a pool.
	NetworkName string
	// EnableOverlappingRanges makes an address unique across every pool of the same network name,
	// not only within its own pool.
	EnableOverlappingRanges bool
	Datastore               string
	BboltPath               string
	LockTimeout             time.Duration
	Kubeconfig              string
	// AgentSocket is the node agent's unix socket, which serves datastore kubernetes.
	AgentSocket string
	// Pool names an operator-made IPPool to draw from instead of an inline range (datastore
	// kubernetes only). Ranges is then empty until the store fills it from the pool, and
	// Requested is checked against the pool's range there.
	Pool     string
	LogFile  string
	LogLevel string
	// Requested are the specific addresses this invocation asks for, from runtimeConfig.ips,
	// args.cni.ips and CNI_ARGS IP=, de-duplicated.
	Requested []netip.Addr
	// Pod identifies the Kubernetes pod, when the runtime passed K8S_POD_* in CNI_ARGS.
	Pod PodRef
	// OverlappingRangesSet is whether the config states enable_overlapping_ranges. When it does
	// not, EnableOverlappingRanges is the default (true), and an IPPool referenced by name decides.
	OverlappingRangesSet bool
	// ReuseCooldown is how long a released address is passed over by claim-next while another
	// address is free (0: off); ReuseCooldownSet is whether the config states it (see cooldown.go).
	ReuseCooldown    time.Duration
	ReuseCooldownSet bool
	// AllowPersistentIPs opts the network in to IPAMClaims (allowPersistentIPs, as KubeVirt's
	// ipam-extensions expects): an attachment whose network selection element carries an
	// ipam-claim-reference holds the claim's address, which outlives the pod (datastore
	// kubernetes only; the store resolves the claim).
	AllowPersistentIPs bool
	// StatefulSets is StatefulSetsSticky or StatefulSetsNone (statefulSets); StatefulSetsSet is
	// whether the config states it (see statefulsets.go).
	StatefulSets    string
	StatefulSetsSet bool
}

// PodRef names the pod behind an attachment, as Multus passes it in CNI_ARGS.
type PodRef struct {
	Namespace string
	Name      string
	UID       string
}

// PoolKey identifies the pool of range i: network name plus subnet, as whereabouts names IPPools.
func (c *Config) PoolKey(i int) string {
	return PoolKey(c.NetworkName, c.Ranges[i].Subnet)
}

// PoolKey identifies a pool by network name and subnet.
func PoolKey(networkName string, subnet netip.Prefix) string {
	if networkName == "" {
		return subnet.String()
	}
	return networkName + "/" + subnet.String()
}

type wireNet struct {
	CNIVersion string          `json:"cniVersion"`
	Name       string          `json:"name"`
	IPAM       json.RawMessage `json:"ipam"`
	// AllowPersistentIPs at the network config's top level is where OVN-Kubernetes and KubeVirt's
	// ipam-extensions read it (the main plugin passes its whole config to the IPAM plugin).
	AllowPersistentIPs *bool `json:"allowPersistentIPs"`
	RuntimeConfig      struct {
		IPs []string `json:"ips"`
	} `json:"runtimeConfig"`
	Args struct {
		CNI struct {
			IPs []string `json:"ips"`
		} `json:"cni"`
	} `json:"args"`
}

type wireIPAM struct {
	Type                    string         `json:"type"`
	Range                   string         `json:"range"`
	RangeStart              string         `json:"range_start"`
	RangeEnd                string         `json:"range_end"`
	Exclude                 []string       `json:"exclude"`
	IPRanges                []RangeSpec    `json:"ipRanges"`
	Gateway                 string         `json:"gateway"`
	Routes                  []*types.Route `json:"routes"`
	DNS                     types.DNS      `json:"dns"`
	NetworkName             string         `json:"network_name"`
	EnableOverlappingRanges *bool          `json:"enable_overlapping_ranges"`
	ReuseCooldown           *string        `json:"reuseCooldown"`
	Kubernetes              struct {
		Kubeconfig  string `json:"kubeconfig"`
		AgentSocket string `json:"agent_socket"`
	} `json:"kubernetes"`
	Pool              string `json:"pool"`
	ConfigurationPath string `json:"configuration_path"`
	LogFile           string `json:"log_file"`
	LogLevel          string `json:"log_level"`
	Datastore         string `json:"datastore"`
	Bbolt             struct {
		Path        string `json:"path"`
		LockTimeout string `json:"lock_timeout"`
	} `json:"bbolt"`
	// AllowPersistentIPs: IPAMClaims (Config.AllowPersistentIPs).
	AllowPersistentIPs *bool `json:"allowPersistentIPs"`
	// StatefulSets: sticky StatefulSet addresses (Config.StatefulSets).
	StatefulSets *string `json:"statefulSets"`
}

// ignoredFields are whereabouts settings that cannot change which address is handed out, so a
// whereabouts NAD that carries them works unchanged.
var ignoredFields = []string{
	"leader_lease_duration", "leader_renew_deadline", "leader_retry_period",
	"sleep_for_race", "reconciler_cron_expression", "node_slice_size",
	"etcd_host", "etcd_username", "etcd_password", "etcd_key_file", "etcd_cert_file", "etcd_ca_cert_file",
}

// netpoolFields are the fields netpool reads; unknown-field errors list them.
var netpoolFields = []string{
	"type", "range", "range_start", "range_end", "exclude", "ipRanges", "gateway", "routes", "dns",
	"network_name", "enable_overlapping_ranges", "kubernetes", "configuration_path", "log_file",
	"log_level", "datastore", "bbolt", "pool", "reuseCooldown", "allowPersistentIPs",
	"statefulSets",
}

var knownFields = slices.Concat(netpoolFields, ignoredFields)

var logLevels = []string{"", "debug", "verbose", "info", "error", "panic"}

// FlatReader reads the global flat configuration file. It returns an error wrapping
// fs.ErrNotExist when the file is absent, which is not an error for the default paths.
type FlatReader func(path string) ([]byte, error)

// Load parses a network configuration (the plugin's stdin) and CNI_ARGS into a validated Config.
// The global flat file named by configuration_path (or found at DefaultFlatConfigPaths) supplies
// defaults; the inline ipam section wins field by field, as in whereabouts. readFlat may be nil.
func Load(stdin []byte, cniArgs string, readFlat FlatReader) (*Config, error) {
	var n wireNet
	if err := json.Unmarshal(stdin, &n); err != nil {
		return nil, configErr("network config", "", "not valid JSON: %v", err)
	}
	if len(n.IPAM) == 0 || bytes.Equal(n.IPAM, []byte("null")) {
		return nil, configErr("ipam", "", "the network config has no ipam section")
	}
	if err := checkFields(n.IPAM); err != nil {
		return nil, err
	}
	var inline wireIPAM
	if err := json.Unmarshal(n.IPAM, &inline); err != nil {
		return nil, configErr("ipam", "", "%v", err)
	}

	var w wireIPAM
	flatFrom, flat, err := readFlatConfig(inline.ConfigurationPath, readFlat)
	if err != nil {
		return nil, err
	}
	if flat != nil {
		if err := decodeFlat(flat, &w); err != nil {
			return nil, configErr("configuration_path", flatFrom, "%s", err)
		}
	}
	// Decoding the inline section over the flat one overwrites exactly the fields it sets.
	if err := json.Unmarshal(n.IPAM, &w); err != nil {
		return nil, configErr("ipam", "", "%v", err)
	}

	c := &Config{
		CNIVersion:  n.CNIVersion,
		Name:        n.Name,
		Routes:      w.Routes,
		DNS:         w.DNS,
		NetworkName: w.NetworkName,
		Kubeconfig:  w.Kubernetes.Kubeconfig,
		AgentSocket: w.Kubernetes.AgentSocket,
		Pool:        w.Pool,
		LogFile:     w.LogFile,
		LogLevel:    w.LogLevel,
	}
	if len(c.NetworkName) > MaxNetworkNameLen {
		return nil, configErr("network_name", c.NetworkName[:32]+"...", "longer than %d bytes", MaxNetworkNameLen)
	}
	if err := c.setStore(&w); err != nil {
		return nil, err
	}
	if err := c.setRanges(&w); err != nil {
		return nil, err
	}
	if !slices.Contains(logLevels, w.LogLevel) {
		return nil, configErr("log_level", w.LogLevel, "want one of debug, verbose, info, error, panic")
	}
	if w.EnableOverlappingRanges == nil {
		c.EnableOverlappingRanges = true
	} else {
		c.EnableOverlappingRanges, c.OverlappingRangesSet = *w.EnableOverlappingRanges, true
	}
	if err := c.setReuseCooldown(&w); err != nil {
		return nil, err
	}
	if err := c.setStatefulSets(&w); err != nil {
		return nil, err
	}
	if err := c.setAllowPersistentIPs(n.AllowPersistentIPs, w.AllowPersistentIPs); err != nil {
		return nil, err
	}
	args, err := ParseCNIArgs(cniArgs)
	if err != nil {
		return nil, err
	}
	c.Pod = PodRef{Namespace: args["K8S_POD_NAMESPACE"], Name: args["K8S_POD_NAME"], UID: args["K8S_POD_UID"]}
	if err := c.setRequested(n.RuntimeConfig.IPs, n.Args.CNI.IPs, args["IP"]); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) setStore(w *wireIPAM) error {
	c.Datastore = w.Datastore
	if c.Datastore == "" {
		c.Datastore = DatastoreBbolt
		if w.Kubernetes.Kubeconfig != "" {
			c.Datastore = DatastoreKubernetes
		}
	}
	switch c.Datastore {
	case DatastoreBbolt:
	case DatastoreKubernetes:
		// The node agent holds the API credentials; kubernetes.kubeconfig only selects this datastore.
		if c.AgentSocket == "" {
			c.AgentSocket = DefaultAgentSocket
		}
		if !strings.HasPrefix(c.AgentSocket, "/") {
			return configErr("kubernetes.agent_socket", c.AgentSocket, "must be an absolute path")
		}
	default:
		return configErr("datastore", w.Datastore, "want %q or %q", DatastoreBbolt, DatastoreKubernetes)
	}
	c.BboltPath = w.Bbolt.Path
	if c.BboltPath == "" {
		c.BboltPath = DefaultBboltPath
	}
	if !strings.HasPrefix(c.BboltPath, "/") {
		return configErr("bbolt.path", c.BboltPath, "must be an absolute path")
	}
	c.LockTimeout = DefaultLockTimeout
	if w.Bbolt.LockTimeout != "" {
		d, err := time.ParseDuration(w.Bbolt.LockTimeout)
		if err != nil || d <= 0 {
			return configErr("bbolt.lock_timeout", w.Bbolt.LockTimeout, "want a positive duration such as 5s")
		}
		if d < MinLockTimeout || d > MaxLockTimeout {
			return configErr("bbolt.lock_timeout", w.Bbolt.LockTimeout, "want a duration from %v to %v", MinLockTimeout, MaxLockTimeout)
		}
		c.LockTimeout = d
	}
	return nil
}

func (c *Config) setRanges(w *wireIPAM) error {
	var gateway netip.Addr
	if w.Gateway != "" {
		g, err := netip.ParseAddr(strings.TrimSpace(w.Gateway))
		if err != nil {
			return configErr("gateway", w.Gateway, "not an IP address")
		}
		gateway = g.Unmap()
	}
	if c.Pool != "" {
		return c.checkPoolRef(w)
	}
	var specs []RangeSpec
	var fields []string
	if w.Range != "" || w.RangeStart != "" || w.RangeEnd != "" || len(w.Exclude) > 0 {
		specs = append(specs, RangeSpec{Range: w.Range, RangeStart: w.RangeStart, RangeEnd: w.RangeEnd, Exclude: w.Exclude})
		fields = append(fields, "ipam")
	}
	for i, s := range w.IPRanges {
		specs = append(specs, s)
		fields = append(fields, fmt.Sprintf("ipRanges[%d]", i))
	}
	if len(specs) == 0 {
		return configErr("range", "", "no range: set range or ipRanges")
	}
	if len(specs) > MaxRanges {
		return configErr("ipRanges", fmt.Sprintf("%d ranges", len(specs)), "at most %d ranges (range and ipRanges together): ADD takes one address from each", MaxRanges)
	}
	for i, s := range specs {
		r, err := ParseRange(fields[i], s, gateway)
		if err != nil {
			return err
		}
		c.Ranges = append(c.Ranges, r)
	}
	if j, i, overlap := firstOverlap(c.Ranges); overlap {
		return configErr(fields[i]+".range", specs[i].Range, "overlaps %s (%s): one ADD would take two addresses from one subnet", fields[j], c.Ranges[j].Subnet)
	}
	if gateway.IsValid() && !slices.ContainsFunc(c.Ranges, func(r Range) bool { return r.Gateway == gateway }) {
		return configErr("gateway", w.Gateway, "is not inside any range (%s)", c.rangeList())
	}
	return nil
}

// checkPoolRef validates a config that draws from an operator-made pool: the pool owns the range,
// exclusions and gateway, so the config may not set them too.
func (c *Config) checkPoolRef(w *wireIPAM) error {
	if c.Datastore != DatastoreKubernetes {
		return configErr("pool", c.Pool, "a pool reference needs datastore %q", DatastoreKubernetes)
	}
	if !isDNSSubdomain(c.Pool) {
		return configErr("pool", c.Pool, "not a valid IPPool name (lower-case DNS subdomain)")
	}
	if w.Range != "" || w.RangeStart != "" || w.RangeEnd != "" || len(w.Exclude) > 0 || len(w.IPRanges) > 0 || w.Gateway != "" {
		return configErr("pool", c.Pool, "the pool defines the range; remove range, range_start, range_end, exclude, ipRanges and gateway")
	}
	return nil
}

// isDNSSubdomain reports whether s is a valid Kubernetes object name (RFC 1123 subdomain). It is
// written out rather than a regexp because compiling one at package init costs every plugin
// process ~45 µs, and the plugin's start-up is its hot path.
func isDNSSubdomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
				return false
			}
		}
	}
	return true
}

func (c *Config) rangeList() string {
	s := make([]string, len(c.Ranges))
	for i, r := range c.Ranges {
		s[i] = r.String()
	}
	return strings.Join(s, ", ")
}

// RangeFor returns the index of the range that contains a's subnet, or -1.
func (c *Config) RangeFor(a netip.Addr) int {
	return slices.IndexFunc(c.Ranges, func(r Range) bool { return r.Subnet.Contains(a) })
}

func (c *Config) setRequested(runtimeIPs, argsIPs []string, cniArgsIP string) error {
	add := func(field, text string) error {
		text = strings.TrimSpace(text)
		if text == "" {
			return nil
		}
		a, err := parseRequested(text)
		if err != nil {
			return configErr(field, text, "not an IP address or address/prefix")
		}
		if !slices.Contains(c.Requested, a) {
			c.Requested = append(c.Requested, a)
		}
		return nil
	}
	for _, s := range runtimeIPs {
		if err := add("runtimeConfig.ips", s); err != nil {
			return err
		}
	}
	for _, s := range argsIPs {
		if err := add("args.cni.ips", s); err != nil {
			return err
		}
	}
	for _, s := range strings.Split(cniArgsIP, ",") {
		if err := add("CNI_ARGS IP", s); err != nil {
			return err
		}
	}
	if c.Pool != "" {
		return nil // the store checks them once it has read the pool's range
	}
	seen := map[int]netip.Addr{}
	for _, a := range c.Requested {
		i := c.RangeFor(a)
		if i < 0 {
			return configErr("requested IP", a.String(), "is not inside any range (%s)", c.rangeList())
		}
		if prev, dup := seen[i]; dup {
			return configErr("requested IP", a.String(), "and %s are both in range %s; one address per range is handed out", prev, c.Ranges[i].Subnet)
		}
		seen[i] = a
	}
	return nil
}

// parseRequested accepts "10.0.0.5" and "10.0.0.5/24": Multus passes the network selection
// element's ips with their prefix length.
func parseRequested(text string) (netip.Addr, error) {
	if strings.Contains(text, "/") {
		p, err := netip.ParsePrefix(text)
		if err != nil {
			return netip.Addr{}, err
		}
		return p.Addr().Unmap(), nil
	}
	a, err := netip.ParseAddr(text)
	return a.Unmap(), err
}

// checkFields rejects keys netpool does not know, because a misspelt range_start or exclude
// silently ignored would hand out addresses the operator meant to keep.
func checkFields(raw []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return configErr("ipam", "", "must be a JSON object: %v", err)
	}
	if k, unknown := unknownField(m); unknown {
		return configErr("ipam", k, "unknown field (known: %s)", strings.Join(netpoolFields, ", "))
	}
	return nil
}

func unknownField(m map[string]json.RawMessage) (string, bool) {
	for k := range m {
		if !slices.Contains(knownFields, k) {
			return k, true
		}
	}
	return "", false
}

// decodeFlat decodes the global flat file into w. Its errors never quote the file: a NAD author
// chooses configuration_path, and an error that echoed what it found would let them read any file
// the plugin (root) can, a line at a time. They say where, by byte offset, not what.
func decodeFlat(flat []byte, w *wireIPAM) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(flat, &m); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return fmt.Errorf("not a JSON object (syntax error at byte %d; contents not shown)", syn.Offset)
		}
		return errors.New("not a JSON object (contents not shown)")
	}
	if _, unknown := unknownField(m); unknown {
		return fmt.Errorf("has a field netpool does not know (contents not shown; known: %s)", strings.Join(netpoolFields, ", "))
	}
	if err := json.Unmarshal(flat, w); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return fmt.Errorf("field %s is not a %s (contents not shown)", typ.Field, typ.Type)
		}
		return errors.New("cannot be decoded (contents not shown)")
	}
	return nil
}

func readFlatConfig(path string, read FlatReader) (string, []byte, error) {
	if read == nil {
		return "", nil, nil
	}
	if path != "" {
		b, err := read(path)
		if err != nil {
			return path, nil, configErr("configuration_path", path, "cannot be read: %v", err)
		}
		return path, b, nil
	}
	for _, p := range DefaultFlatConfigPaths {
		b, err := read(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return p, nil, configErr("configuration_path", p, "cannot be read: %v", err)
		}
		return p, b, nil
	}
	return "", nil, nil
}

// ParseCNIArgs splits CNI_ARGS ("K1=V1;K2=V2") into a map. Keys netpool does not use are kept and
// ignored, as IgnoreUnknown would; a pair without '=' is an error.
func ParseCNIArgs(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, pair := range strings.Split(s, ";") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, configErr("CNI_ARGS", pair, "want KEY=VALUE pairs separated by ';'")
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return m, nil
}
