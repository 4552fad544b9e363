package migrate

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/ippool"
	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/ipam"
)

// poolPlan is one netpool IPPool that NADs' ranges derive, and what goes into it.
type poolPlan struct {
	entry   int // index in Report.Pools
	want    *ipamv1.IPPool
	rng     ipam.Range
	cfg     *ipam.Config // the first NAD section's config: the pool's window is the first config's
	overlap bool
	// networks maps each CNI network name that draws from the pool to the NADs (namespace/name)
	// whose sections have it, so an allocation is recorded under the network that made it.
	networks map[string][]string
	nads     []int // indexes in Report.NADs
	wb       *wbPool
	// blocked is set when the pool itself is a conflict or invalid: its addresses are not planned.
	blocked bool
}

// resPlan is one reservation to create.
type resPlan struct {
	entry int // index in Report.Allocations
	pool  *poolPlan
	want  *ipamv1.OverlappingRangeIPReservation
	owner allocator.Owner
}

// plan is what a run will write, and the report that says so.
type plan struct {
	report *Report
	pools  []*poolPlan
	res    []*resPlan
	// resByName finds a planned reservation by name: two allocations must not claim one name.
	resByName map[string]*resPlan
	// configs are the loaded configs of Report.NADs, index for index (nil for a NAD in error).
	configs []*ipam.Config
	// sections are the NADs' sections, index for index with Report.NADs (zero for a NAD in error),
	// which --switch-nads edits.
	sections []section
	// dirs are the directories the node agents serve configuration_path and log_file from.
	dirs AgentDirs
	// wbByName finds whereabouts' IPPools by name.
	wbByName map[string][]*wbPool
	// nads are the NADs read; scoped is set when they are one namespace's.
	nads   []nadv1.NetworkAttachmentDefinition
	scoped bool
	// progress says what the run does as it goes.
	progress progress
}

// AgentDirs are the directories the node agents serve a NAD's files from: ipam.AgentConfigDirs
// and ipam.AgentLogDir, and what their --extra-config-dir and --extra-log-dir add.
type AgentDirs struct {
	Config, Log []string
}

// DefaultAgentDirs are the directories an agent serves without --extra-config-dir or
// --extra-log-dir.
func DefaultAgentDirs() AgentDirs {
	return AgentDirs{Config: slices.Clone(ipam.AgentConfigDirs), Log: []string{ipam.AgentLogDir}}
}

func (p *plan) configOf(nad int) *ipam.Config { return p.configs[nad] }

// newPlan works out, from what the cluster holds, which netpool pools and reservations the
// whereabouts allocations become. It reads the netpool pools and the pods; it writes nothing.
func newPlan(ctx context.Context, c kubeclient.Reader, s *state, scoped bool, dirs AgentDirs) (*plan, error) {
	p := &plan{report: &Report{NADs: []NAD{}, Pools: []Pool{}, Allocations: []Allocation{}, Findings: []Finding{}, Discrepancies: []Discrepancy{}},
		resByName: map[string]*resPlan{}, dirs: dirs, scoped: scoped}
	byName := map[string]*poolPlan{}
	sort.Slice(s.nads, func(i, j int) bool {
		a, b := s.nads[i], s.nads[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	wbByName := map[string][]*wbPool{}
	for _, w := range s.pools {
		wbByName[w.Name] = append(wbByName[w.Name], w)
	}
	p.wbByName = wbByName
	for _, nad := range s.nads {
		p.addNAD(nad, byName)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	used := map[*wbPool]bool{}
	matched := map[string]bool{} // namespace/name of whereabouts reservations that an allocation explains
	networks := map[string]bool{}
	pods := podCache{c: c, pods: map[string]*corev1.Pod{}}
	wbLocks := map[string]wbReservation{} // whereabouts' reservations by namespace/name
	for _, r := range s.reservations {
		wbLocks[r.Namespace+"/"+r.Name] = r
	}
	for _, n := range names {
		pp := byName[n]
		networks[pp.cfg.NetworkName] = true
		if err := p.resolvePool(ctx, c, pp, wbByName, s.unreadable); err != nil {
			return nil, err
		}
		for _, w := range wbByName[wbPoolName(pp.cfg.NetworkName, pp.rng.Subnet)] {
			used[w] = true // a NAD uses it, even where it is the pool's problem
		}
		if pp.blocked || pp.wb == nil {
			continue
		}
		for _, pr := range pp.wb.Problems {
			p.report.Allocations = append(p.report.Allocations, Allocation{Whereabouts: pp.wb.allocationID(pr.Key),
				Pool: pp.want.Name, Action: ActionInvalid, Reason: pr.Reason})
		}
		for _, a := range pp.wb.Allocations {
			key := pp.wb.Namespace + "/" + wbReservationName(pp.cfg.NetworkName, a.Addr)
			matched[key] = true
			if r, ok := wbLocks[key]; ok && r.PodRef != a.PodRef {
				// whereabouts disagrees with itself on who holds the address: nobody can tell which
				// pod uses it, and importing either could give it to two.
				p.report.Allocations = append(p.report.Allocations, Allocation{Address: a.Addr.String(), Pool: pp.want.Name,
					Whereabouts: pp.wb.allocationID(a.Key), Pod: a.PodRef, ContainerID: a.ContainerID, IfName: a.IfName, Action: ActionInvalid,
					Reason: fmt.Sprintf("whereabouts' OverlappingRangeIPReservation %s names pod %s, its IPPool allocation pod %s", key, r.PodRef, a.PodRef)})
				continue
			}
			if err := p.addAllocation(ctx, &pods, pp, a); err != nil {
				return nil, err
			}
		}
	}
	p.addFindings(s, used, matched, networks, scoped)
	return p, nil
}

// addNAD records the whereabouts sections of nad and the pools their ranges derive.
func (p *plan) addNAD(nad nadv1.NetworkAttachmentDefinition, byName map[string]*poolPlan) {
	id := nad.Namespace + "/" + nad.Name
	sections, err := whereaboutsSections([]byte(nad.Spec.Config))
	if err != nil {
		if looksWhereabouts(nad.Spec.Config) {
			p.report.NADs = append(p.report.NADs, NAD{Namespace: nad.Namespace, Name: nad.Name, Error: err.Error()})
			p.configs = append(p.configs, nil)
			p.sections = append(p.sections, section{})
		}
		return
	}
	for _, s := range sections {
		c := s.Config
		if s.Switched && !p.hasWhereaboutsPool(c) {
			continue // netpool's own NAD: whereabouts holds nothing of it
		}
		e := NAD{Namespace: nad.Namespace, Name: nad.Name, Path: s.Path, Network: c.Name, NetworkName: c.NetworkName,
			Change: fmt.Sprintf("%s.type: %q to %q", s.Path, whereaboutsType, ipam.PluginType), Switched: s.Switched}
		var notes []string
		if s.Switched {
			e.Change = ""
			notes = append(notes, "switched already: whereabouts' records of its ranges are verified, and what netpool does not hold yet is imported")
		}
		if c.Datastore != ipam.DatastoreKubernetes {
			notes = append(notes, "the section names no kubernetes.kubeconfig: the nodes' flat file must select datastore kubernetes, or netpool keeps the network's addresses in a local file")
		}
		notes = append(notes, p.dirs.notes(s)...)
		e.Note = strings.Join(notes, "; ")
		idx := len(p.report.NADs)
		for _, r := range c.Ranges {
			name := ippool.DerivedName(c.NetworkName, r.Subnet)
			e.Pools = append(e.Pools, name)
			pp := byName[name]
			if pp == nil {
				want, err := ippool.Derive(c.NetworkName, r, ippool.RulesOf(c))
				if err != nil {
					e.Error = err.Error()
					continue
				}
				pp = &poolPlan{want: want, rng: r, cfg: c, networks: map[string][]string{}}
				byName[name] = pp
				p.pools = append(p.pools, pp)
			} else if err := ippool.CheckDerivedFor(pp.want, c.NetworkName, r); err != nil {
				e.Error = err.Error()
				continue
			} else if _, err := ippool.ResolveOverlapping(pp.want, c); err != nil {
				e.Error = err.Error()
				continue
			}
			pp.networks[c.Name] = append(pp.networks[c.Name], id)
			pp.nads = append(pp.nads, idx)
		}
		p.report.NADs = append(p.report.NADs, e)
		p.configs = append(p.configs, c)
		p.sections = append(p.sections, s)
	}
}

// hasWhereaboutsPool reports whether whereabouts keeps an IPPool for one of c's ranges.
func (p *plan) hasWhereaboutsPool(c *ipam.Config) bool {
	for _, r := range c.Ranges {
		if len(p.wbByName[wbPoolName(c.NetworkName, r.Subnet)]) > 0 {
			return true
		}
	}
	return false
}

// notes are the section's files the agents will refuse: a configuration_path outside their config
// directories fails every ADD with code 7, a log_file outside their log directories logs an
// error on every call (and the call's log goes to the agent's stderr).
func (d AgentDirs) notes(s section) []string {
	var out []string
	if path := s.ConfigurationPath; path != "" && !ipam.InDirs(path, d.Config) {
		out = append(out, fmt.Sprintf("configuration_path %s is outside the directories the netpool agent serves (%s): every ADD fails with code 7 "+
			"until the agents run with --extra-config-dir=%s and mount it (docs/migrate-from-whereabouts.md)",
			path, strings.Join(d.Config, ", "), flatDir(path)))
	}
	if path := s.Config.LogFile; path != "" && !ipam.InDirs(path, d.Log) {
		out = append(out, fmt.Sprintf("log_file %s is outside the directories the netpool agent writes logs to (%s): every call logs an error "+
			"and its log goes to the agent's stderr, until the agents run with --extra-log-dir=%s and mount it",
			path, strings.Join(d.Log, ", "), filepath.Dir(path)))
	}
	return out
}

// flatDir is the directory to serve for a flat file: the one holding whereabouts.d, as the
// defaults hold it, else the file's own.
func flatDir(path string) string {
	dir := filepath.Dir(path)
	if filepath.Base(dir) == "whereabouts.d" {
		dir = filepath.Dir(dir)
	}
	return dir
}

// looksWhereabouts reports whether a config that failed to load names whereabouts at all, so that
// unrelated broken NADs stay out of the report.
func looksWhereabouts(config string) bool {
	return strings.Contains(config, `"`+whereaboutsType+`"`)
}

// resolvePool finds the whereabouts IPPool of pp and what netpool already holds under its name.
func (p *plan) resolvePool(ctx context.Context, c kubeclient.Reader, pp *poolPlan, wbByName map[string][]*wbPool, unreadable []unreadablePool) error {
	e := Pool{Name: pp.want.Name, Range: pp.want.Spec.Range, NetworkName: pp.want.Spec.NetworkName}
	wbName := wbPoolName(pp.cfg.NetworkName, pp.rng.Subnet)
	for _, u := range unreadable {
		if u.name == wbName {
			e.Action, e.Reason, pp.blocked = ActionInvalid, u.reason, true
		}
	}
	switch found := wbByName[wbName]; {
	case pp.blocked:
	case len(found) > 1:
		var where []string
		for _, w := range found {
			where = append(where, w.Namespace)
		}
		e.Action, pp.blocked = ActionInvalid, true
		e.Reason = fmt.Sprintf("whereabouts IPPool %s exists in namespaces %s: which one the nodes use cannot be told", wbName, strings.Join(where, ", "))
	case len(found) == 1:
		pp.wb = found[0]
		e.Whereabouts, e.Locked = pp.wb.Namespace+"/"+pp.wb.Name, pp.wb.Locked
		if pp.wb.Range != pp.rng.Subnet {
			e.Action, pp.blocked = ActionInvalid, true
			e.Reason = fmt.Sprintf("whereabouts IPPool %s has range %s, not the NAD's %s", e.Whereabouts, pp.wb.Range, pp.rng.Subnet)
		}
	}
	if !pp.blocked {
		have := &ipamv1.IPPool{}
		err := c.Get(ctx, kubeclient.ObjectKey{Name: pp.want.Name}, have)
		switch {
		case apierrors.IsNotFound(err):
			e.Action, pp.overlap = ActionCreate, ippool.Overlapping(pp.want)
		case err != nil:
			return fmt.Errorf("failed to read IPPool %s: %w", pp.want.Name, err)
		default:
			e.Action = ActionUnchanged
			if err := ippool.CheckDerivedFor(have, pp.cfg.NetworkName, pp.rng); err != nil {
				e.Action, e.Reason, pp.blocked = ActionConflict, err.Error(), true
			} else if pp.overlap, err = ippool.ResolveOverlapping(have, pp.cfg); err != nil {
				e.Action, e.Reason, pp.blocked = ActionConflict, err.Error(), true
			}
			// The other sections of the pool must agree with the mode the pool records.
			for _, i := range pp.nads {
				n := &p.report.NADs[i]
				if n.Error != "" {
					continue
				}
				if c := p.configOf(i); c != nil {
					if _, err := ippool.ResolveOverlapping(have, c); err != nil {
						n.Error = err.Error()
					}
				}
			}
		}
	}
	pp.entry = len(p.report.Pools)
	p.report.Pools = append(p.report.Pools, e)
	return nil
}
