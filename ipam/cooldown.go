package ipam

import (
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

// ParseReuseCooldown parses a reuseCooldown value: a Go duration ("30s", "1h30m") of 0 (off) or
// from MinReuseCooldown to MaxReuseCooldown. An error is a ConfigError naming field.
func ParseReuseCooldown(field, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, configErr(field, s, "want a duration such as 30s or 1h (0s turns the cool-down off)")
	}
	if d != 0 && (d < MinReuseCooldown || d > MaxReuseCooldown) {
		return 0, configErr(field, s, "want 0s (off) or a duration from %v to %v", MinReuseCooldown, MaxReuseCooldown)
	}
	return d, nil
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
