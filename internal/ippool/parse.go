package ippool

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"strings"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// Pool is an IPPool with its spec parsed into the allocator's range.
type Pool struct {
	// Object is the IPPool as read; Pool never changes it.
	Object *ipamv1.IPPool
	// Range is what the pool can hand out, parsed by the plugin's own range code, so a capacity or
	// an address check here is exactly the allocator's.
	Range ipam.Range
}

// Parse parses a pool's spec. The error names the spec field in the API's camelCase and the value,
// such as `spec.rangeStart "10.0.0.9": is after range_end 10.0.0.5`.
func Parse(p *ipamv1.IPPool) (*Pool, error) {
	r, err := RangeOf(&p.Spec)
	if err != nil {
		return nil, err
	}
	return &Pool{Object: p, Range: r}, nil
}

// RangeOf parses a pool spec into the allocator's range (see Parse).
func RangeOf(spec *ipamv1.IPPoolSpec) (ipam.Range, error) {
	var gateway netip.Addr
	if spec.Gateway != "" {
		g, err := netip.ParseAddr(spec.Gateway)
		if err != nil {
			return ipam.Range{}, fmt.Errorf("spec.gateway %q: not an IP address", spec.Gateway)
		}
		gateway = g
	}
	r, err := ipam.ParseRange("spec", ipam.RangeSpec{
		Range: spec.Range, RangeStart: spec.RangeStart, RangeEnd: spec.RangeEnd, Exclude: spec.Exclude,
	}, gateway)
	var ce *ipam.ConfigError
	if errors.As(err, &ce) {
		field := strings.NewReplacer("range_start", "rangeStart", "range_end", "rangeEnd").Replace(ce.Field)
		if ce.Value == "" {
			return r, fmt.Errorf("%s: %s", field, ce.Reason)
		}
		return r, fmt.Errorf("%s %q: %s", field, ce.Value, ce.Reason)
	}
	return r, err
}

// Name is the pool's object name.
func (p *Pool) Name() string { return p.Object.Name }

// NetworkName is the pool's address space: pools of one network name share it.
func (p *Pool) NetworkName() string { return p.Object.Spec.NetworkName }

// Capacity is how many addresses the pool can hand out: its window less exclusions and gateway.
func (p *Pool) Capacity() *big.Int { return p.Range.Capacity() }

// AddressClass is what one address is to a pool.
type AddressClass string

// The classes Classify returns.
const (
	// AddressUsable may be handed out.
	AddressUsable AddressClass = "Usable"
	// AddressOutside is not in the pool's range at all.
	AddressOutside AddressClass = "Outside"
	// AddressReserved is the range's network address or (IPv4) broadcast address.
	AddressReserved AddressClass = "Reserved"
	// AddressOutsideWindow is in the range but before rangeStart or after rangeEnd.
	AddressOutsideWindow AddressClass = "OutsideWindow"
	// AddressGateway is the pool's gateway.
	AddressGateway AddressClass = "Gateway"
	// AddressExcluded is excluded by spec.exclude.
	AddressExcluded AddressClass = "Excluded"
)

// Classify says what a is to the pool, and why, in the words the allocator uses when it refuses a
// requested address (the reason is empty for a usable address).
func (p *Pool) Classify(a netip.Addr) (AddressClass, string) {
	a = a.Unmap()
	err := p.Range.Allowed(a)
	switch {
	case err == nil:
		return AddressUsable, ""
	case !p.Range.Subnet.Contains(a):
		return AddressOutside, err.Error()
	case a == p.Range.Gateway:
		return AddressGateway, err.Error()
	case a.Compare(p.Range.Start) < 0 || a.Compare(p.Range.End) > 0:
		if first, last := ipam.UsableBounds(p.Range.Subnet); a.Compare(first) < 0 || a.Compare(last) > 0 {
			return AddressReserved, err.Error()
		}
		return AddressOutsideWindow, err.Error()
	}
	return AddressExcluded, err.Error()
}
