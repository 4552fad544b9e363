package egressrouter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
)

// netConf is the netpool form of the config, as the EgressRouter reconciler writes it into the NAD.
// Top-level fields the runtime adds (runtimeConfig, args, prevResult, ...) are allowed; inside the
// router's own objects an unknown field is an error, so that a typo cannot silently drop a rule.
type netConf struct {
	CNIVersion       string          `json:"cniVersion"`
	Name             string          `json:"name"`
	Type             string          `json:"type"`
	Interface        json.RawMessage `json:"interface"`
	ClusterInterface string          `json:"clusterInterface"`
	Addresses        json.RawMessage `json:"addresses"`
	Redirect         json.RawMessage `json:"redirect"`
	MacSeed          string          `json:"macSeed"`
}

type interfaceConf struct {
	Type   string `json:"type"`
	Master string `json:"master"`
	Mode   string `json:"mode"`
	MTU    int    `json:"mtu"`
}

type addressConf struct {
	IP      string `json:"ip"`
	Gateway string `json:"gateway"`
}

type redirectConf struct {
	Rules      []ruleConf `json:"rules"`
	FallbackIP string     `json:"fallbackIP"`
}

type ruleConf struct {
	DestinationIP string `json:"destinationIP"`
	Port          int    `json:"port"`
	Protocol      string `json:"protocol"`
	TargetPort    *int   `json:"targetPort"`
}

// Parse reads the network config on stdin, in either form, into a validated Router. Every error
// wraps ErrInvalidConfig and names the field and value at fault.
func Parse(stdin []byte) (*Router, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(stdin, &keys); err != nil {
		return nil, invalid("failed to parse network config: %v", err)
	}
	var base netConf
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
		r, err = fromNetConf(&base)
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

func fromNetConf(c *netConf) (*Router, error) {
	r := &Router{Mode: "bridge", ClusterInterface: c.ClusterInterface}
	if r.ClusterInterface == "" {
		r.ClusterInterface = "eth0"
	}
	if len(c.Interface) > 0 && string(c.Interface) != "null" {
		var ic interfaceConf
		if err := strictUnmarshal(c.Interface, &ic); err != nil {
			return nil, invalid("interface: %v", err)
		}
		if ic.Type != "" && ic.Type != "macvlan" {
			return nil, invalid("interface.type %q is not supported; the only type is macvlan", ic.Type)
		}
		r.Master, r.MTU = ic.Master, ic.MTU
		if ic.Mode != "" {
			r.Mode = ic.Mode
		}
	}
	var addrs []addressConf
	if len(c.Addresses) > 0 {
		if err := strictUnmarshal(c.Addresses, &addrs); err != nil {
			return nil, invalid("addresses: %v", err)
		}
	}
	for _, a := range addrs {
		addr, err := parseAddress(a.IP, a.Gateway)
		if err != nil {
			return nil, err
		}
		r.Addresses = append(r.Addresses, addr)
	}
	if len(c.Redirect) > 0 && string(c.Redirect) != "null" {
		var rc redirectConf
		if err := strictUnmarshal(c.Redirect, &rc); err != nil {
			return nil, invalid("redirect: %v", err)
		}
		if len(rc.Rules) > MaxRules {
			return nil, invalid("%d redirect rules given; at most %d", len(rc.Rules), MaxRules)
		}
		for i, rule := range rc.Rules {
			parsed, err := rule.parse()
			if err != nil {
				return nil, invalid("redirect.rules[%d]: %v", i, err)
			}
			r.Rules = append(r.Rules, parsed)
		}
		if rc.FallbackIP != "" {
			fb, err := netip.ParseAddr(rc.FallbackIP)
			if err != nil {
				return nil, invalid("redirect.fallbackIP %q is not an IP address", rc.FallbackIP)
			}
			r.Fallback = fb.Unmap()
		}
	}
	if len(c.MacSeed) > maxSeed {
		return nil, invalid("macSeed is %d bytes long; at most %d", len(c.MacSeed), maxSeed)
	}
	if c.MacSeed != "" {
		r.MAC = macFromSeed(c.MacSeed)
	}
	return r, nil
}

func (rc ruleConf) parse() (Rule, error) {
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

func portNumber(field string, n int) (uint16, error) {
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

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the value")
	}
	return nil
}
