package migrate

import (
	"fmt"
	"sort"
	"strings"
)

// addFindings reports whereabouts objects that no NAD's range explains: pools no NAD uses, and
// reservations without an allocation (whereabouts leaks). With a namespace given, only those of
// the networks of that namespace's NADs are reported.
func (p *plan) addFindings(s *state, used map[*wbPool]bool, matched map[string]bool, networks map[string]bool, scoped bool) {
	inScope := func(name string) bool {
		if !scoped {
			return true
		}
		for n := range networks {
			if n != "" && strings.HasPrefix(name, n+"-") {
				return true
			}
		}
		return false
	}
	for _, w := range s.pools {
		if !used[w] && len(w.Allocations)+len(w.Problems) > 0 && inScope(w.Name) {
			p.report.Findings = append(p.report.Findings, Finding{Object: "IPPool.whereabouts.cni.cncf.io " + w.Namespace + "/" + w.Name,
				Action: ActionSkipped, Reason: fmt.Sprintf("no whereabouts NAD uses range %s: its %d allocations are not imported", w.Range, len(w.Allocations)+len(w.Problems))})
		}
	}
	for _, u := range s.unreadable {
		if inScope(u.name) && !p.blocksPool(u.name) {
			p.report.Findings = append(p.report.Findings, Finding{Object: "IPPool.whereabouts.cni.cncf.io " + u.namespace + "/" + u.name,
				Action: ActionSkipped, Reason: u.reason + "; no whereabouts NAD uses it"})
		}
	}
	for _, r := range s.reservations {
		if !matched[r.Namespace+"/"+r.Name] && inScope(r.Name) {
			p.report.Findings = append(p.report.Findings, Finding{Object: "OverlappingRangeIPReservation.whereabouts.cni.cncf.io " + r.Namespace + "/" + r.Name,
				Action: ActionSkipped, Reason: fmt.Sprintf("no IPPool allocation of a whereabouts NAD's range holds it (pod %s): a whereabouts leak, not imported", r.PodRef)})
		}
	}
	sort.Slice(p.report.Findings, func(i, j int) bool { return p.report.Findings[i].Object < p.report.Findings[j].Object })
}

// blocksPool reports whether the unreadable whereabouts pool wbName is already reported as a pool.
func (p *plan) blocksPool(wbName string) bool {
	for _, pp := range p.pools {
		if wbPoolName(pp.cfg.NetworkName, pp.rng.Subnet) == wbName {
			return true
		}
	}
	return false
}
