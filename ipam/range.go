package ipam

import (
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"
)

// Range is one allocatable address range: a subnet, the window [Start, End] inside it that may be
// handed out, and the addresses inside the window that must never be (exclusions and the gateway).
// All fields are one address family.
type Range struct {
	// Subnet is the masked prefix. Its length is the prefix length of every address handed out, and
	// together with the network name it identifies the pool.
	Subnet netip.Prefix
	// Start and End bound the window. They never include the network address nor, for IPv4, the
	// broadcast address, except on point-to-point prefixes (/31, /32, /127, /128, RFC 3021/6164).
	Start netip.Addr
	End   netip.Addr
	// Excluded is sorted, merged (no two intervals overlap or touch) and clipped to [Start, End]; it
	// includes the gateway. Keeping it merged is what lets NextAllowed finish in one jump.
	Excluded []Interval
	// Gateway is the gateway reported for addresses of this range; invalid when none applies.
	Gateway netip.Addr
}

// RangeSpec is the wire form of one range, as whereabouts writes it.
type RangeSpec struct {
	Range      string   `json:"range"`
	RangeStart string   `json:"range_start,omitempty"`
	RangeEnd   string   `json:"range_end,omitempty"`
	Exclude    []string `json:"exclude,omitempty"`
}

// ParseRange validates a RangeSpec and builds its Range. field is the JSON path used in errors
// (for example "ipRanges[1]").
func ParseRange(field string, spec RangeSpec, gateway netip.Addr) (Range, error) {
	var r Range
	text := strings.TrimSpace(spec.Range)
	if text == "" {
		return r, configErr(field+".range", "", "a range is required (a CIDR such as 10.0.0.0/24, or A-B/nn)")
	}
	if first, rest, ok := strings.Cut(text, "-"); ok {
		// whereabouts' "A-B/nn": the subnet is B/nn, and A and B are the window.
		a, err := netip.ParseAddr(strings.TrimSpace(first))
		if err != nil {
			return r, configErr(field+".range", text, "the part before '-' is not an IP address")
		}
		b, err := netip.ParsePrefix(strings.TrimSpace(rest))
		if err != nil {
			return r, configErr(field+".range", text, "the part after '-' is not an address with a prefix length (B/nn)")
		}
		if a.Is4() != b.Addr().Is4() {
			return r, configErr(field+".range", text, "start and end are of different address families")
		}
		r.Subnet = b.Masked()
		if spec.RangeStart == "" {
			spec.RangeStart = a.String()
		}
		if spec.RangeEnd == "" {
			spec.RangeEnd = b.Addr().String()
		}
	} else {
		p, err := netip.ParsePrefix(text)
		if err != nil {
			return r, configErr(field+".range", text, "not a CIDR (want e.g. 10.0.0.0/24 or fd00::/64)")
		}
		if p.Addr().Zone() != "" {
			return r, configErr(field+".range", text, "a zone is not allowed")
		}
		r.Subnet = p.Masked()
		// "10.0.0.5/24" keeps whereabouts' reading: the subnet is 10.0.0.0/24 and, unless
		// range_start says otherwise, the window starts at the address written.
		if p.Addr() != r.Subnet.Addr() && spec.RangeStart == "" {
			spec.RangeStart = p.Addr().String()
		}
	}
	r.Subnet = netip.PrefixFrom(r.Subnet.Addr().Unmap(), unmappedBits(r.Subnet))

	first, last := usableBounds(r.Subnet)
	r.Start, r.End = first, last
	if spec.RangeStart != "" {
		a, err := parseAddrIn(field+".range_start", spec.RangeStart, r.Subnet)
		if err != nil {
			return r, err
		}
		if a.Compare(first) > 0 {
			r.Start = a
		}
	}
	if spec.RangeEnd != "" {
		a, err := parseAddrIn(field+".range_end", spec.RangeEnd, r.Subnet)
		if err != nil {
			return r, err
		}
		if a.Compare(last) < 0 {
			r.End = a
		}
	}
	if r.Start.Compare(r.End) > 0 {
		return r, configErr(field+".range_start", r.Start.String(), "is after range_end %s", r.End)
	}

	var excluded []Interval
	for i, e := range spec.Exclude {
		iv, err := parseExclude(fmt.Sprintf("%s.exclude[%d]", field, i), e, r.Subnet.Addr().Is4())
		if err != nil {
			return r, err
		}
		excluded = append(excluded, iv)
	}
	if gateway.IsValid() && r.Subnet.Contains(gateway) {
		r.Gateway = gateway
		excluded = append(excluded, Interval{gateway, gateway})
	}
	r.Excluded = mergeIntervals(excluded, r.Start, r.End)
	if err := checkExcludeLimit(field, r); err != nil {
		return r, err
	}
	return r, nil
}

// unmappedBits keeps a prefix length right when an IPv4-mapped IPv6 prefix is unmapped.
func unmappedBits(p netip.Prefix) int {
	if p.Addr().Is4In6() {
		return max(p.Bits()-96, 0)
	}
	return p.Bits()
}

// usableBounds returns the first and last address of a subnet that may ever be handed out.
func usableBounds(p netip.Prefix) (netip.Addr, netip.Addr) {
	first, last := p.Addr(), LastOf(p)
	pointToPoint := p.Bits() >= p.Addr().BitLen()-1
	if pointToPoint {
		return first, last
	}
	first = first.Next() // the network address (IPv6: the subnet-router anycast address)
	if p.Addr().Is4() {
		last = last.Prev() // the IPv4 broadcast address
	}
	return first, last
}

func parseAddrIn(field, text string, subnet netip.Prefix) (netip.Addr, error) {
	a, err := netip.ParseAddr(strings.TrimSpace(text))
	if err != nil {
		return a, configErr(field, text, "not an IP address")
	}
	a = a.Unmap()
	if a.Is4() != subnet.Addr().Is4() {
		return a, configErr(field, text, "is not of the same address family as range %s", subnet)
	}
	if !subnet.Contains(a) {
		return a, configErr(field, text, "is outside range %s", subnet)
	}
	return a, nil
}

// parseExclude accepts a CIDR or a bare IP, as both appear in whereabouts NADs.
func parseExclude(field, text string, is4 bool) (Interval, error) {
	text = strings.TrimSpace(text)
	var iv Interval
	if strings.Contains(text, "/") {
		p, err := netip.ParsePrefix(text)
		if err != nil {
			return iv, configErr(field, text, "not a CIDR or IP address")
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), unmappedBits(p)).Masked()
		iv = Interval{p.Addr(), LastOf(p)}
	} else {
		a, err := netip.ParseAddr(text)
		if err != nil {
			return iv, configErr(field, text, "not a CIDR or IP address")
		}
		a = a.Unmap()
		iv = Interval{a, a}
	}
	if iv.First.Is4() != is4 {
		return iv, configErr(field, text, "is not of the same address family as its range")
	}
	return iv, nil
}

// mergeIntervals sorts, clips to [lo, hi], and merges overlapping or touching intervals.
func mergeIntervals(in []Interval, lo, hi netip.Addr) []Interval {
	var out []Interval
	slices.SortFunc(in, func(a, b Interval) int { return a.First.Compare(b.First) })
	for _, iv := range in {
		if iv.Last.Compare(lo) < 0 || iv.First.Compare(hi) > 0 {
			continue
		}
		if iv.First.Compare(lo) < 0 {
			iv.First = lo
		}
		if iv.Last.Compare(hi) > 0 {
			iv.Last = hi
		}
		if n := len(out); n > 0 {
			prev := &out[n-1]
			if next := prev.Last.Next(); next.IsValid() && iv.First.Compare(next) <= 0 {
				if iv.Last.Compare(prev.Last) > 0 {
					prev.Last = iv.Last
				}
				continue
			}
		}
		out = append(out, iv)
	}
	return out
}

// Window is the interval of addresses the range may hand out, before exclusions.
func (r Range) Window() Interval { return Interval{r.Start, r.End} }

// Family is 4 or 6.
func (r Range) Family() int {
	if r.Subnet.Addr().Is4() {
		return 4
	}
	return 6
}

// Contains reports whether a may ever be handed out by this range.
func (r Range) Contains(a netip.Addr) bool {
	return r.Allowed(a) == nil
}

// Allowed explains why a may not be handed out by this range, or returns nil.
func (r Range) Allowed(a netip.Addr) error {
	a = a.Unmap()
	switch {
	case !r.Subnet.Contains(a):
		return fmt.Errorf("%s is outside range %s", a, r.Subnet)
	case a == r.Gateway:
		return fmt.Errorf("%s is the gateway of range %s", a, r.Subnet)
	case a.Compare(r.Start) < 0 || a.Compare(r.End) > 0:
		if first, last := usableBounds(r.Subnet); a.Compare(first) < 0 || a.Compare(last) > 0 {
			return fmt.Errorf("%s is the network or broadcast address of range %s", a, r.Subnet)
		}
		return fmt.Errorf("%s is outside the window %s-%s of range %s", a, r.Start, r.End, r.Subnet)
	}
	if i := r.exclusionAt(a); i >= 0 {
		return fmt.Errorf("%s is excluded from range %s by %s-%s", a, r.Subnet, r.Excluded[i].First, r.Excluded[i].Last)
	}
	return nil
}

// NextAllowed returns the smallest address >= a that this range may hand out. Exclusions are
// merged, so at most one jump is needed: the cost is one binary search, whatever the range size.
func (r Range) NextAllowed(a netip.Addr) (netip.Addr, bool) {
	if a.Compare(r.Start) < 0 {
		a = r.Start
	}
	if a.Compare(r.End) > 0 {
		return netip.Addr{}, false
	}
	if i := r.exclusionAt(a); i >= 0 {
		a = r.Excluded[i].Last.Next()
		if !a.IsValid() || a.Compare(r.End) > 0 {
			return netip.Addr{}, false
		}
	}
	return a, true
}

// exclusionAt returns the index of the exclusion containing a, or -1.
func (r Range) exclusionAt(a netip.Addr) int {
	i, found := slices.BinarySearchFunc(r.Excluded, a, func(iv Interval, t netip.Addr) int {
		switch {
		case iv.Last.Compare(t) < 0:
			return -1
		case iv.First.Compare(t) > 0:
			return 1
		}
		return 0
	})
	if !found {
		return -1
	}
	return i
}

// Capacity is how many addresses the range can hand out: the window less its exclusions.
func (r Range) Capacity() *big.Int {
	n := r.Window().Size()
	for _, iv := range r.Excluded {
		n.Sub(n, iv.Size())
	}
	return n
}

// String is the canonical text form, used in messages and as part of pool identity.
func (r Range) String() string {
	return r.Subnet.String()
}
