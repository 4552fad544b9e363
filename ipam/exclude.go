package ipam

// MaxExclude is the most CIDRs the exclusions of one range may make, written as the fewest CIDRs
// after merging and clipping to the window, the gateway not counted. It is the IPPool API's limit
// on spec.exclude, so every range a config describes fits in a pool, and one limit holds in every
// mode: ParseRange refuses a range over it, for a config as for a pool.
const MaxExclude = 256

// ExcludedCIDRs writes the range's exclusions, except the gateway, as the fewest CIDRs (a single
// address as a bare IP): the spec.exclude of the pool the range describes.
func (r Range) ExcludedCIDRs() []string {
	var out []string
	for _, iv := range r.Excluded {
		if iv.First == r.Gateway && iv.Last == r.Gateway {
			continue // the gateway is excluded by spec.gateway
		}
		out = append(out, iv.CIDRStrings()...)
	}
	return out
}

// checkExcludeLimit refuses a range whose exclusions make more than MaxExclude CIDRs. Counting
// stops at the limit, so an oversized list costs no more than a list at the limit.
func checkExcludeLimit(field string, r Range) error {
	n := 0
	for _, iv := range r.Excluded {
		if iv.First == r.Gateway && iv.Last == r.Gateway {
			continue
		}
		n += len(iv.CIDRStrings())
		if n > MaxExclude {
			return configErr(field+".exclude", "", "the exclusions make more than %d CIDRs once merged and clipped to the window %s-%s; at most %d are allowed",
				MaxExclude, r.Start, r.End, MaxExclude)
		}
	}
	return nil
}
