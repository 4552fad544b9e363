package egressrouter

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// MaxRules bounds the redirect rules one router may carry: the config comes from a NAD, whose author
// is untrusted, and every rule becomes an nftables rule.
const MaxRules = 256

// maxSeed bounds macSeed for the same reason.
const maxSeed = 1024

// Router is the one internal form both config forms convert to, validated.
type Router struct {
	CNIVersion string
	Name       string
	// Mode is what the router does with what arrives on the cluster interface (Redirect, with its
	// rules and fallback).
	Mode Mode
	// Master is the macvlan's lower device in the host namespace; empty means the interface of the
	// host's default route, looked up at ADD.
	Master      string
	MacvlanMode string // bridge, private, vepa or passthru
	// MTU is the macvlan's MTU; 0 means the master's.
	MTU int
	// ClusterInterface is the pod's cluster-network interface: it keeps its default route, and
	// redirected traffic arrives on it.
	ClusterInterface string
	Addresses        []Address // at most one per family
	// MAC, when set, is the macvlan's address, derived from macSeed.
	MAC net.HardwareAddr

	// form is the config form the router was written in, for naming fields in errors.
	form form
}

// Address is one of the router's addresses on the egress network, with the gateway that leads
// beyond it.
type Address struct {
	Prefix  netip.Prefix
	Gateway netip.Addr
}

// Rule redirects one port and protocol arriving on the cluster interface to Destination:TargetPort.
type Rule struct {
	Destination netip.Addr
	Port        uint16
	Protocol    string // TCP, UDP or SCTP
	TargetPort  uint16
}

var macvlanModes = map[string]bool{"bridge": true, "private": true, "vepa": true, "passthru": true}

// AddressOf returns the router's address of the family of a, if it has one.
func (r *Router) AddressOf(is4 bool) (Address, bool) {
	for _, a := range r.Addresses {
		if a.Prefix.Addr().Is4() == is4 {
			return a, true
		}
	}
	return Address{}, false
}

// validate checks what both forms must satisfy once converted; each message names the offending value.
func (r *Router) validate() error {
	if r.Name == "" {
		return invalid("name is required")
	}
	if r.Mode == nil {
		return invalid("the router has no mode")
	}
	if !macvlanModes[r.MacvlanMode] {
		return invalid("macvlan mode %q is not one of bridge, private, vepa, passthru", r.MacvlanMode)
	}
	// Passthru gives the whole master to the macvlan. The default-route interface is the node's
	// uplink, so passthru must name its master: a NAD author may not take the node off its network
	// by leaving it out.
	if r.MacvlanMode == "passthru" && r.Master == "" {
		return invalid("%s passthru needs %s: passthru takes the whole interface from the node, and the default, the interface of the node's default route, is the node's uplink",
			r.form.modeField(), r.form.masterField())
	}
	if r.Master != "" {
		if err := validIfName(r.Master); err != nil {
			return invalid("master %q: %v", r.Master, err)
		}
	}
	if r.MTU < 0 || r.MTU > 65535 {
		return invalid("mtu %d is not between 0 and 65535", r.MTU)
	}
	if err := validIfName(r.ClusterInterface); err != nil {
		return invalid("clusterInterface %q: %v", r.ClusterInterface, err)
	}
	if err := r.validateAddresses(); err != nil {
		return err
	}
	return r.Mode.validate(r)
}

func (r *Router) validateAddresses() error {
	if len(r.Addresses) == 0 {
		return invalid("at least one address is required")
	}
	if len(r.Addresses) > 2 {
		return invalid("%d addresses given; at most one per IP family", len(r.Addresses))
	}
	if len(r.Addresses) == 2 && r.Addresses[0].Prefix.Addr().Is4() == r.Addresses[1].Prefix.Addr().Is4() {
		return invalid("addresses %s and %s are of one IP family; at most one per family",
			r.Addresses[0].Prefix, r.Addresses[1].Prefix)
	}
	for _, a := range r.Addresses {
		p, gw := a.Prefix, a.Gateway
		if p.Bits() == p.Addr().BitLen() {
			return invalid("address %s has a host prefix; give the subnet's prefix length", p)
		}
		if p.Addr() == p.Masked().Addr() {
			return invalid("address %s is its subnet's network address", p)
		}
		if !gw.IsValid() {
			return invalid("address %s has no gateway", p)
		}
		if gw.Is4() != p.Addr().Is4() || !p.Contains(gw) {
			return invalid("gateway %s of address %s is not inside its subnet %s", gw, p, p.Masked())
		}
		if gw == p.Addr() {
			return invalid("gateway %s is the address itself", gw)
		}
	}
	return nil
}

// validate checks the rules and the fallback against the router's addresses.
func (rd *Redirect) validate(r *Router) error {
	if len(rd.Rules) > MaxRules {
		return invalid("%d redirect rules given; at most %d", len(rd.Rules), MaxRules)
	}
	seen := map[string]bool{}
	for _, rule := range rd.Rules {
		if rule.Port == 0 || rule.TargetPort == 0 {
			return invalid("redirect rule %s: port and targetPort must be between 1 and 65535", rule)
		}
		// Rules are per family (a dual-stack router may send port 80 to an IPv4 and an IPv6 host).
		key := fmt.Sprintf("%d/%s/%s", rule.Port, rule.Protocol, familyName(rule.Destination))
		if seen[key] {
			return invalid("redirect rules repeat port %d protocol %s for %s", rule.Port, rule.Protocol, familyName(rule.Destination))
		}
		seen[key] = true
		if err := r.routable("destinationIP", rule.Destination); err != nil {
			return err
		}
	}
	if rd.Fallback.IsValid() {
		return r.routable("fallbackIP", rd.Fallback)
	}
	return nil
}

// routable checks that dst is a unicast address of a family the router has an address in.
func (r *Router) routable(field string, dst netip.Addr) error {
	if !dst.IsValid() || dst.IsUnspecified() || dst.IsMulticast() || dst.IsLoopback() || dst.IsLinkLocalUnicast() {
		return invalid("%s %s is not a routable unicast address", field, dst)
	}
	if _, ok := r.AddressOf(dst.Is4()); !ok {
		return invalid("%s %s has no router address of its IP family", field, dst)
	}
	return nil
}

func (rule Rule) String() string {
	return fmt.Sprintf("%d %s -> %s", rule.Port, rule.Protocol, netip.AddrPortFrom(rule.Destination, rule.TargetPort))
}

// validIfName applies the kernel's rules for an interface name.
func validIfName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty interface name")
	case len(name) > 15:
		return fmt.Errorf("longer than 15 bytes")
	case name == "." || name == "..":
		return fmt.Errorf("not an interface name")
	case strings.ContainsAny(name, "/: \t\n\v\f\r\x00"):
		return fmt.Errorf("contains '/', ':' or whitespace")
	}
	return nil
}

// parseProtocol accepts a protocol in any case and returns it upper-cased.
func parseProtocol(s string) (string, error) {
	p := strings.ToUpper(s)
	switch p {
	case "TCP", "UDP", "SCTP":
		return p, nil
	}
	return "", fmt.Errorf("protocol %q is not one of TCP, UDP, SCTP", s)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}

func familyName(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}
