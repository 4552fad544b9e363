package ipam

import (
	"math/big"
	"net/netip"
)

// Interval is an inclusive, single-family run of addresses [First, Last].
type Interval struct {
	First netip.Addr
	Last  netip.Addr
}

// Contains reports whether a lies in the interval.
func (iv Interval) Contains(a netip.Addr) bool {
	return iv.First.Compare(a) <= 0 && a.Compare(iv.Last) <= 0
}

// Size is the number of addresses in the interval. It is a big.Int because an IPv6 interval can
// hold up to 2^128 addresses.
func (iv Interval) Size() *big.Int {
	n := new(big.Int).Sub(addrInt(iv.Last), addrInt(iv.First))
	return n.Add(n, big.NewInt(1))
}

// LastOf returns the last address of a prefix (the IPv4 broadcast address for IPv4).
func LastOf(p netip.Prefix) netip.Addr {
	p = p.Masked()
	b := p.Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		for bit := 0; bit < 8; bit++ {
			if i*8+bit >= bits {
				b[i] |= 0x80 >> bit
			}
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// AddrKey is the 16-byte, network-order key of an address. Fixed width makes byte order equal
// numeric order, which lets a store range-scan addresses; IPv4 maps into ::ffff:0:0/96.
func AddrKey(a netip.Addr) [16]byte { return a.As16() }

// AddrFromKey reverses AddrKey, unmapping IPv4.
func AddrFromKey(k []byte) (netip.Addr, bool) {
	if len(k) != 16 {
		return netip.Addr{}, false
	}
	a := netip.AddrFrom16([16]byte(k))
	return a.Unmap(), true
}

func addrInt(a netip.Addr) *big.Int {
	b := a.As16()
	if a.Is4() {
		v4 := a.As4()
		return new(big.Int).SetBytes(v4[:])
	}
	return new(big.Int).SetBytes(b[:])
}

// CIDRStrings covers the interval with the fewest CIDRs, in order, writing a single address as a
// bare IP, as IPPool exclusions and whereabouts configs are written.
func (iv Interval) CIDRStrings() []string {
	var out []string
	for a := iv.First; ; {
		bits := a.BitLen()
		// Widen the prefix while it stays aligned on a and inside the interval.
		for bits > 0 {
			p := netip.PrefixFrom(a, bits-1).Masked()
			if p.Addr() != a || LastOf(p).Compare(iv.Last) > 0 {
				break
			}
			bits--
		}
		p := netip.PrefixFrom(a, bits)
		if bits == a.BitLen() {
			out = append(out, a.String())
		} else {
			out = append(out, p.String())
		}
		last := LastOf(p)
		if last.Compare(iv.Last) >= 0 {
			return out
		}
		a = last.Next()
	}
}

// UsableBounds returns the first and last address of a subnet that may ever be handed out: the
// window of a range whose config does not narrow it.
func UsableBounds(p netip.Prefix) (netip.Addr, netip.Addr) { return usableBounds(p.Masked()) }
