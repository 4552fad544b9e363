package egressrouter

import (
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/netpool/netpool/crds/network/v1/egressnad"
)

// Parse reads the network config on stdin, in either form, into a validated Router. Every error
// wraps ErrInvalidConfig and names the field and value at fault.
func Parse(stdin []byte) (*Router, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(stdin, &keys); err != nil {
		return nil, invalid("failed to parse network config: %v", err)
	}
	var base struct{ CNIVersion, Name string }
	if err := json.Unmarshal(stdin, &base); err != nil {
		return nil, invalid("failed to parse network config: %v", err)
	}
	var (
		r   *Router
		err error
	)
	if isOpenShift(keys) {
		if k, mixed := firstKey(keys, "interface", "addresses", "redirect", "clusterInterface", "macSeed"); mixed {
			return nil, invalid("config mixes OpenShift's fields (ip, interfaceType, interfaceArgs) with netpool's %q; use one form", k)
		}
		r, err = fromOpenShift(stdin)
	} else {
		r, err = fromNetConf(stdin)
	}
	if err != nil {
		return nil, err
	}
	r.CNIVersion, r.Name = base.CNIVersion, base.Name
	if err := r.validate(); err != nil {
		return nil, err
	}
	return r, nil
}

func isOpenShift(keys map[string]json.RawMessage) bool {
	_, ok := firstKey(keys, "ip", "interfaceType", "interfaceArgs", "podIP", "ipConfig")
	return ok
}

func firstKey(keys map[string]json.RawMessage, names ...string) (string, bool) {
	for _, n := range names {
		if _, ok := keys[n]; ok {
			return n, true
		}
	}
	return "", false
}

// fromNetConf reads netpool's form: the NAD config the EgressRouter reconciler writes.
func fromNetConf(stdin []byte) (*Router, error) {
	c, err := egressnad.Decode(stdin)
	if err != nil {
		return nil, invalid("%v", err)
	}
	r := &Router{MacvlanMode: "bridge", ClusterInterface: c.ClusterInterface}
	if r.ClusterInterface == "" {
		r.ClusterInterface = "eth0"
	}
	if ic := c.Interface; ic != nil {
		if ic.Type != "" && ic.Type != "macvlan" {
			return nil, invalid("interface.type %q is not supported; the only type is macvlan", ic.Type)
		}
		r.Master, r.MTU = ic.Master, ic.MTU
		if ic.Mode != "" {
			r.MacvlanMode = ic.Mode
		}
	}
	for _, a := range c.Addresses {
		addr, err := parseAddress(a.IP, a.Gateway)
		if err != nil {
			return nil, err
		}
		r.Addresses = append(r.Addresses, addr)
	}
	switch mode := c.RouterMode(); mode {
	case egressnad.ModeRedirect:
		if r.Mode, err = redirectFrom(c.Redirect); err != nil {
			return nil, err
		}
	default:
		return nil, invalid("mode %q is not supported; the only mode is %s", mode, egressnad.ModeRedirect)
	}
	if len(c.MACSeed) > maxSeed {
		return nil, invalid("macSeed is %d bytes long; at most %d", len(c.MACSeed), maxSeed)
	}
	if c.MACSeed != "" {
		r.MAC = macFromSeed(c.MACSeed)
	}
	return r, nil
}

// redirectFrom reads the Redirect mode's section; absent, the router redirects nothing and
// rejects everything.
func redirectFrom(c *egressnad.Redirect) (*Redirect, error) {
	rd := &Redirect{}
	if c == nil {
		return rd, nil
	}
	if len(c.Rules) > MaxRules {
		return nil, invalid("%d redirect rules given; at most %d", len(c.Rules), MaxRules)
	}
	for i, rule := range c.Rules {
		parsed, err := parseRule(rule)
		if err != nil {
			return nil, invalid("redirect.rules[%d]: %v", i, err)
		}
		rd.Rules = append(rd.Rules, parsed)
	}
	if c.FallbackIP != "" {
		fb, err := netip.ParseAddr(c.FallbackIP)
		if err != nil {
			return nil, invalid("redirect.fallbackIP %q is not an IP address", c.FallbackIP)
		}
		rd.Fallback = fb.Unmap()
	}
	return rd, nil
}

func parseRule(rc egressnad.Rule) (Rule, error) {
	dst, err := netip.ParseAddr(rc.DestinationIP)
	if err != nil || dst.Zone() != "" {
		return Rule{}, fmt.Errorf("destinationIP %q is not an IP address", rc.DestinationIP)
	}
	proto, err := parseProtocol(rc.Protocol)
	if err != nil {
		return Rule{}, err
	}
	port, err := portNumber("port", rc.Port)
	if err != nil {
		return Rule{}, err
	}
	target := port
	if rc.TargetPort != nil {
		if target, err = portNumber("targetPort", *rc.TargetPort); err != nil {
			return Rule{}, err
		}
	}
	return Rule{Destination: dst.Unmap(), Port: port, Protocol: proto, TargetPort: target}, nil
}

func portNumber(field string, n int32) (uint16, error) {
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("%s %d is not between 1 and 65535", field, n)
	}
	return uint16(n), nil
}

// parseAddress parses one router address: a CIDR and, if given, its gateway.
func parseAddress(ip, gateway string) (Address, error) {
	p, err := netip.ParsePrefix(ip)
	if err != nil {
		return Address{}, invalid("address %q is not a CIDR (address/prefix length): %v", ip, err)
	}
	if p.Addr().Is4In6() || p.Addr().Zone() != "" {
		return Address{}, invalid("address %q is an IPv4-mapped or zoned IPv6 address; write IPv4 as IPv4", ip)
	}
	a := Address{Prefix: p}
	if gateway != "" {
		gw, err := netip.ParseAddr(gateway)
		if err != nil || gw.Zone() != "" {
			return Address{}, invalid("gateway %q of address %s is not an IP address", gateway, ip)
		}
		a.Gateway = gw.Unmap()
	}
	return a, nil
}
