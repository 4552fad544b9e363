package egressnad

// PluginType is the CNI type of the netpool-egress-router plugin.
const PluginType = "netpool-egress-router"

// Mode is how the router forwards, as the EgressRouter API names it.
type Mode string

// ModeRedirect DNATs each rule's port to its destination, and every other port to the fallback.
// It is the only mode, and what a config without "mode" means.
const ModeRedirect Mode = "Redirect"

// Config is the NAD config of an EgressRouter, in netpool's form. Read it with Decode.
//
// Marshalled by the reconciler, every field below is written except those marked omitempty, in
// this order; a round-trip test pins the bytes, since the router pod's config hash covers them
// and a change would replace every router pod on upgrade.
type Config struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	// Mode is the router's mode; empty means ModeRedirect. The reconciler leaves it out for
	// Redirect, so that the NADs it wrote before the field existed stay as they are.
	Mode Mode `json:"mode,omitempty"`
	// Interface is the egress interface; absent means a bridge-mode macvlan on the interface of
	// the node's default route.
	Interface *Interface `json:"interface,omitempty"`
	// ClusterInterface is the pod's cluster-network interface: it keeps its default route, and
	// redirected traffic arrives on it. Empty means eth0.
	ClusterInterface string    `json:"clusterInterface"`
	Addresses        []Address `json:"addresses"`
	// Redirect is the configuration of ModeRedirect.
	Redirect *Redirect `json:"redirect,omitempty"`
	// MACSeed, when set, gives the macvlan a stable MAC derived from it: the router's identity.
	MACSeed string `json:"macSeed,omitempty"`
}

// Interface is the router's egress interface: a macvlan on Master.
type Interface struct {
	// Type is the interface kind: "macvlan", the only one (empty means it too).
	Type string `json:"type"`
	// Master is the macvlan's lower device in the node's namespace; empty means the interface of
	// the node's default route.
	Master string `json:"master"`
	// Mode is the macvlan mode in lower case: bridge (also when empty), private, vepa or passthru.
	Mode string `json:"mode"`
	// MTU is the macvlan's MTU; 0 means the master's.
	MTU int `json:"mtu"`
}

// Address is one of the router's addresses on the egress network: a CIDR and its gateway.
type Address struct {
	IP      string `json:"ip"`
	Gateway string `json:"gateway"`
}

// Redirect is what ModeRedirect does: the rules in order, then the fallback.
type Redirect struct {
	Rules []Rule `json:"rules"`
	// FallbackIP receives every port of its family that no rule matches; empty means none, and
	// such traffic is rejected.
	FallbackIP string `json:"fallbackIP,omitempty"`
}

// Rule sends Port/Protocol arriving on the cluster interface to DestinationIP:TargetPort.
type Rule struct {
	DestinationIP string `json:"destinationIP"`
	Port          int32  `json:"port"`
	// Protocol is TCP, UDP or SCTP.
	Protocol string `json:"protocol"`
	// TargetPort is the destination's port; nil means Port. The reconciler always writes it.
	TargetPort *int32 `json:"targetPort,omitempty"`
}

// RouterMode is the config's mode, with its default applied.
func (c *Config) RouterMode() Mode {
	if c.Mode == "" {
		return ModeRedirect
	}
	return c.Mode
}
