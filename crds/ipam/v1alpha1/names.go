package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"strconv"
	"strings"
)

const (
	// maxNameLength is the longest object name: a DNS-1123 subdomain has at most 253 characters.
	maxNameLength = 253

	// maxLabelValueLength is the longest label value.
	maxLabelValueLength = 63

	// hashLength is the number of hex digits of the SHA-256 suffix that replaces the tail of a
	// name too long to use whole: 40 bits, so two long names that share their first 200-odd
	// characters collide with a chance of about one in a trillion.
	hashLength = 10
)

// PoolName returns the name of the IPPool that holds subnet for the network networkName, derived
// as whereabouts derives its pool names: 10.0.0.0/24 gives "10.0.0.0-24", fd00::/64 gives
// "fd00---64" (every ':' and '/' becomes '-'), and a non-empty network name is put in front
// ("net1-10.0.0.0-24").
//
// The subnet is masked first, so 10.0.0.5/24 names the same pool as 10.0.0.0/24. The name is a
// valid DNS-1123 subdomain whatever the input: it is lowercased, any other invalid character becomes
// '-', a dot-separated part that would start or end with '-' gets a '0' there ("::/0" gives
// "0---0"), and a name longer than 253 characters keeps its first 242 and ends in '-' and a
// 10-digit hash of the whole. Inputs that differ only in what this rewrites ("Net1" and "net1")
// share a name. An invalid subnet gives "invalid-prefix".
func PoolName(networkName string, subnet netip.Prefix) string {
	name := normalise(subnet.Masked().String())
	if networkName != "" {
		name = normalise(networkName) + "-" + name
	}
	return shorten(name, maxNameLength)
}

// ReservationName returns the name of the OverlappingRangeIPReservation that claims addr within
// scope. Because the name is a function of the address and the scope, creating the object is the
// atomic claim: a second Create for the same address in the same scope fails with AlreadyExists.
//
// scope is the network within which addresses are unique (the NAD's network_name; pools of
// different networks may overlap). An empty scope gives the normalised address alone: "10.0.0.7",
// "fd00--7" for fd00::7, "fd00--0" for fd00:: (as whereabouts writes it). Otherwise the name is
// "<normalised scope>.<normalised address>". Normalising is PoolName's; the address keeps its
// canonical text without a zone, and only the scope is shortened when the whole would exceed 253
// characters. Scopes that normalise alike share their reservations: a false conflict at worst,
// never a duplicate address. An invalid addr gives "invalid-ip".
func ReservationName(scope string, addr netip.Addr) string {
	a := normalise(addr.WithZone("").String())
	if scope == "" {
		return a
	}
	return shorten(normalise(scope), maxNameLength-len(a)-1) + "." + a
}

// SliceName returns the name of the IPPoolSlice that is block number index of the pool named pool:
// "<pool>.<index>" (blocks are numbered from 0 at the start of the pool's range). Claiming a block
// is one Create under this name. pool is normalised as in PoolName (a valid pool name is left
// as it is) and shortened when the whole would exceed 253 characters.
func SliceName(pool string, index uint64) string {
	i := strconv.FormatUint(index, 10)
	return shorten(normalise(pool), maxNameLength-len(i)-1) + "." + i
}

// LabelValue returns name as a label value, for NodeLabel and PoolLabel. A label value holds at
// most 63 characters, while an object name may hold 253: a longer name is normalised as in
// PoolName, cut to its first 52 characters and ended with '-' and a 10-digit hash of the whole.
// Selecting by the label then needs the same call on the name being looked for. An empty name
// stays empty.
func LabelValue(name string) string {
	if name == "" || len(name) <= maxLabelValueLength && name == normalise(name) {
		return name
	}
	return shorten(normalise(name), maxLabelValueLength)
}

// normalise rewrites s into a valid DNS-1123 subdomain (without the length limit): lowercase,
// every character other than a-z, 0-9, '-' and '.' replaced by '-', and each dot-separated part
// made to start and end with a letter or digit by adding a '0' where it would not (an empty part
// becomes "0"). Adding rather than trimming keeps "fd00::" and "fd00" apart.
func normalise(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		default:
			return '-'
		}
	}, s)
	parts := strings.Split(s, ".")
	for i, p := range parts {
		if p == "" {
			parts[i] = "0"
			continue
		}
		if p[0] == '-' {
			p = "0" + p
		}
		if p[len(p)-1] == '-' {
			p += "0"
		}
		parts[i] = p
	}
	return strings.Join(parts, ".")
}

// shorten returns name (already normalised) when it has at most limit characters. Otherwise it
// keeps as much of the start as fits before '-' and a hash of the whole name, dropping any '-'
// or '.' that the cut leaves at the end, so the result is still a valid name. limit must exceed
// hashLength+1.
func shorten(name string, limit int) string {
	if len(name) <= limit {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	head := strings.TrimRight(name[:limit-hashLength-1], "-.")
	return head + "-" + hex.EncodeToString(sum[:])[:hashLength]
}
