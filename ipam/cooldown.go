package ipam

import (
	"strings"
	"time"
)

// Bounds of reuseCooldown. The IPPool CRD's spec.reuseCooldown has the same bounds (CEL), so a
// value the API server accepts on a pool is one a config may state too.
const (
	// MinReuseCooldown is the shortest cool-down other than 0 (off): below a second it could not
	// outlast the ARP and neighbour entries it exists to let expire.
	MinReuseCooldown = time.Second
	// MaxReuseCooldown is the longest cool-down. The embedded store keeps one entry per address
	// released within the cool-down; a week bounds that, and beyond it a released address is no
	// longer what a stale cache or firewall rule remembers.
	MaxReuseCooldown = 7 * 24 * time.Hour
)

// MaxReuseCooldownLen bounds a reuseCooldown's text, as the CRD does.
const MaxReuseCooldownLen = 16

// ParseReuseCooldown parses a reuseCooldown value: a duration ("30s", "1h30m") of 0 (off) or from
// MinReuseCooldown to MaxReuseCooldown. The grammar is the CRD's (see cooldownGrammar), narrower
// than Go's, so that the API server and the config parser accept the same values. An error is a
// ConfigError naming field.
func ParseReuseCooldown(field, s string) (time.Duration, error) {
	if len(s) > MaxReuseCooldownLen {
		return 0, configErr(field, s[:MaxReuseCooldownLen]+"...", "longer than %d bytes", MaxReuseCooldownLen)
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || !cooldownGrammar(s) {
		return 0, configErr(field, s, "want a duration such as 30s or 1h (0s turns the cool-down off)")
	}
	if d != 0 && (d < MinReuseCooldown || d > MaxReuseCooldown) {
		return 0, configErr(field, s, "want 0s (off) or a duration from %v to %v", MinReuseCooldown, MaxReuseCooldown)
	}
	return d, nil
}

// cooldownGrammar reports whether s is "0" or a sequence of numbers with a unit, each number of
// 1-6 digits with an optional fraction of 1-6 digits and each unit one of ns, us, ms, s, m, h: the
// pattern of the CRD's CEL rule. With at most 16 characters no such value overflows a duration,
// which CEL would report as an evaluation error rather than a message. It is written out rather
// than a regexp because the plugin's start-up is its hot path.
func cooldownGrammar(s string) bool {
	if s == "0" {
		return true
	}
	digits := func(i int) int { // the end of a run of 1-6 digits at i, or -1
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i || j-i > 6 {
			return -1
		}
		return j
	}
	i := 0
	for i < len(s) {
		if i = digits(i); i < 0 {
			return false
		}
		if i < len(s) && s[i] == '.' {
			if i = digits(i + 1); i < 0 {
				return false
			}
		}
		switch {
		case strings.HasPrefix(s[i:], "ns"), strings.HasPrefix(s[i:], "us"), strings.HasPrefix(s[i:], "ms"):
			i += 2
		case strings.HasPrefix(s[i:], "s"), strings.HasPrefix(s[i:], "m"), strings.HasPrefix(s[i:], "h"):
			i++
		default:
			return false
		}
	}
	return s != ""
}

// setReuseCooldown applies reuseCooldown. Unset, the cool-down is off for an inline range and the
// IPPool's for a pool referenced by name (ReuseCooldownSet tells the two apart).
func (c *Config) setReuseCooldown(w *wireIPAM) error {
	if w.ReuseCooldown == nil {
		return nil
	}
	d, err := ParseReuseCooldown("reuseCooldown", *w.ReuseCooldown)
	if err != nil {
		return err
	}
	c.ReuseCooldown, c.ReuseCooldownSet = d, true
	return nil
}
