package ipam

import (
	"strconv"
	"strings"
)

// ParseOrdinal parses a StatefulSet pod's ordinal as the StatefulSet controller writes it (the
// apps.kubernetes.io/pod-index label, the name's suffix): decimal, no sign, no leading zero,
// within int32.
func ParseOrdinal(s string) (int32, bool) {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 32)
	return int32(n), err == nil
}

// OrdinalName splits a StatefulSet-like pod name, <set>-<ordinal>, as the embedded store's sticky
// rule reads it; ok is false for any other name.
func OrdinalName(name string) (set string, ordinal int32, ok bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || name[i-1] == '-' { // a StatefulSet's name, a DNS label, does not end in '-'
		return "", 0, false
	}
	if ordinal, ok = ParseOrdinal(name[i+1:]); !ok {
		return "", 0, false
	}
	return name[:i], ordinal, true
}
