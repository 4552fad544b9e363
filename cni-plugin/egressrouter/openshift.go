package egressrouter

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// openShiftConf is the config OpenShift's network operator writes into its egress-router NAD, read
// so that an existing NAD of that kind keeps working with "type" changed.
type openShiftConf struct {
	InterfaceType string                     `json:"interfaceType"`
	InterfaceArgs map[string]json.RawMessage `json:"interfaceArgs"`
	IP            *openShiftIP               `json:"ip"`
	PodIP         json.RawMessage            `json:"podIP"`
	IPConfig      json.RawMessage            `json:"ipConfig"`
}

type openShiftIP struct {
	Addresses    []string `json:"addresses"`
	Gateway      string   `json:"gateway"`
	Destinations []string `json:"destinations"`
	FallbackIP   string   `json:"fallbackIP"`
}

func fromOpenShift(stdin []byte) (*Router, error) {
	var c openShiftConf
	if err := json.Unmarshal(stdin, &c); err != nil {
		return nil, invalid("failed to parse network config: %v", err)
	}
	// podIP and ipConfig select addresses per pod or from a ConfigMap; ignoring them would claim a
	// wrong address, so they are refused.
	if len(c.PodIP) > 0 || len(c.IPConfig) > 0 {
		return nil, invalid("podIP and ipConfig are not supported; give the router's addresses in ip.addresses")
	}
	if c.InterfaceType != "" && c.InterfaceType != "macvlan" {
		return nil, invalid("interfaceType %q is not supported; the only type is macvlan", c.InterfaceType)
	}
	// OpenShift's egress-router CNI has the Redirect mode only.
	r := &Router{MacvlanMode: "bridge", ClusterInterface: "eth0", form: openShiftForm}
	if err := r.applyInterfaceArgs(c.InterfaceArgs); err != nil {
		return nil, err
	}
	if c.IP == nil {
		return nil, invalid("ip is required: the router's addresses, gateway and destinations")
	}
	if err := r.applyOpenShiftIP(c.IP); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Router) applyInterfaceArgs(args map[string]json.RawMessage) error {
	for k, raw := range args {
		switch k {
		case "master", "mode":
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return invalid("interfaceArgs.%s: want a string, got %s", k, raw)
			}
			if k == "master" {
				r.Master = s
			} else if s != "" {
				r.MacvlanMode = strings.ToLower(s)
			}
		case "mtu":
			mtu, err := parseMTU(raw)
			if err != nil {
				return invalid("interfaceArgs.mtu: %v", err)
			}
			r.MTU = mtu
		default:
			return invalid("interfaceArgs.%s is not supported; the arguments are master, mode and mtu", k)
		}
	}
	return nil
}

// parseMTU accepts the MTU as OpenShift writes it (a string) or as a number.
func parseMTU(raw json.RawMessage) (int, error) {
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		return n, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("want a number, got %s", raw)
	}
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return n, nil
}

func (r *Router) applyOpenShiftIP(ip *openShiftIP) error {
	var gw netip.Addr
	if ip.Gateway != "" {
		var err error
		if gw, err = netip.ParseAddr(ip.Gateway); err != nil || gw.Zone() != "" {
			return invalid("ip.gateway %q is not an IP address", ip.Gateway)
		}
		gw = gw.Unmap()
	}
	for _, s := range ip.Addresses {
		a, err := parseAddress(s, "")
		if err != nil {
			return err
		}
		// OpenShift has one gateway for all addresses: it belongs to the address whose subnet holds it.
		if gw.IsValid() && a.Prefix.Contains(gw) {
			a.Gateway = gw
		}
		r.Addresses = append(r.Addresses, a)
	}
	if gw.IsValid() && len(r.Addresses) > 0 && !r.hasGateway(gw) {
		return invalid("ip.gateway %s is not inside the subnet of any of ip.addresses %s", gw, strings.Join(ip.Addresses, ", "))
	}
	if len(ip.Destinations) > MaxRules+1 {
		return invalid("%d destinations given; at most %d", len(ip.Destinations), MaxRules+1)
	}
	rd := &Redirect{}
	r.Mode = rd
	for i, d := range ip.Destinations {
		rule, fallback, err := ParseDestination(d)
		if err != nil {
			return invalid("ip.destinations[%d]: %v", i, err)
		}
		if fallback.IsValid() {
			if rd.Fallback.IsValid() {
				return invalid("ip.destinations[%d] %q is a second fallback; %s is already one", i, d, rd.Fallback)
			}
			rd.Fallback = fallback
			continue
		}
		rd.Rules = append(rd.Rules, rule)
	}
	if ip.FallbackIP != "" {
		fb, err := netip.ParseAddr(ip.FallbackIP)
		if err != nil || fb.Zone() != "" {
			return invalid("ip.fallbackIP %q is not an IP address", ip.FallbackIP)
		}
		if rd.Fallback.IsValid() && rd.Fallback != fb.Unmap() {
			return invalid("ip.fallbackIP %s and the fallback destination %s disagree", fb, rd.Fallback)
		}
		rd.Fallback = fb.Unmap()
	}
	return nil
}

func (r *Router) hasGateway(gw netip.Addr) bool {
	for _, a := range r.Addresses {
		if a.Gateway == gw {
			return true
		}
	}
	return false
}

// ParseDestination parses one of OpenShift's ip.destinations: "port PROTO ip [targetPort]" is a
// redirect rule, and a lone "ip" is the fallback. The ip may carry a host prefix (/32, /128), as
// some manifests write it.
func ParseDestination(s string) (Rule, netip.Addr, error) {
	f := strings.Fields(s)
	switch len(f) {
	case 1:
		ip, err := parseHostIP(f[0])
		if err != nil {
			return Rule{}, netip.Addr{}, err
		}
		return Rule{}, ip, nil
	case 3, 4:
	default:
		return Rule{}, netip.Addr{}, fmt.Errorf("%q is neither \"port protocol ip [targetPort]\" nor a fallback \"ip\"", s)
	}
	port, err := parsePort("port", f[0])
	if err != nil {
		return Rule{}, netip.Addr{}, err
	}
	proto, err := parseProtocol(f[1])
	if err != nil {
		return Rule{}, netip.Addr{}, err
	}
	ip, err := parseHostIP(f[2])
	if err != nil {
		return Rule{}, netip.Addr{}, err
	}
	target := port
	if len(f) == 4 {
		if target, err = parsePort("targetPort", f[3]); err != nil {
			return Rule{}, netip.Addr{}, err
		}
	}
	return Rule{Destination: ip, Port: port, Protocol: proto, TargetPort: target}, netip.Addr{}, nil
}

func parsePort(field, s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%s %q is not between 1 and 65535", field, s)
	}
	return uint16(n), nil
}

func parseHostIP(s string) (netip.Addr, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Bits() != p.Addr().BitLen() {
			return netip.Addr{}, fmt.Errorf("destination %q is not an IP address or a host prefix (/32, /128)", s)
		}
		return p.Addr().Unmap(), nil
	}
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("destination %q is not an IP address", s)
	}
	return ip.Unmap(), nil
}
