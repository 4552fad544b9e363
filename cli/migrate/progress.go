package migrate

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// progress says, on the operator's terminal (stderr), what a run is doing as it goes: a run over
// thousands of allocations makes one request per object, twice, and must not look hung.
type progress struct {
	w     io.Writer
	start time.Time
}

func newProgress(w io.Writer) progress { return progress{w: w, start: time.Now()} }

// say writes one line with the time since the run began; nothing when no writer was given.
func (pr progress) say(format string, args ...any) {
	if pr.w != nil {
		fmt.Fprintf(pr.w, "migrate: %s (%s)\n", fmt.Sprintf(format, args...), time.Since(pr.start).Round(100*time.Millisecond))
	}
}

// planned says, per NAD section, the pools it derives and how many whereabouts allocations they
// hold, once the plan is made.
func (p *plan) planned() {
	perPool := map[string]int{}
	for _, a := range p.report.Allocations {
		perPool[a.Pool]++
	}
	for _, n := range p.report.NADs {
		id := n.Namespace + "/" + n.Name
		if n.Error != "" && len(n.Pools) == 0 {
			p.progress.say("NAD %s: %s", id, n.Error)
			continue
		}
		allocs := 0
		for _, pl := range n.Pools {
			allocs += perPool[pl]
		}
		p.progress.say("NAD %s %s: pools %s, %d whereabouts allocations", id, n.Path, strings.Join(n.Pools, ","), allocs)
	}
}

// wrote says what write did with one pool and its reservations.
func (p *plan) wrote(pp *poolPlan, dry bool, actions map[Action]int) {
	var nads []string
	for _, i := range pp.nads {
		nads = append(nads, p.report.NADs[i].Namespace+"/"+p.report.NADs[i].Name)
	}
	phase := "apply"
	if dry {
		phase = "dry run"
	}
	counts := []string{}
	for _, a := range []Action{ActionCreate, ActionCreated, ActionUnchanged, ActionConflict, ActionInvalid} {
		if actions[a] > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", actions[a], a))
		}
	}
	if len(counts) == 0 {
		counts = append(counts, "none")
	}
	p.progress.say("%s: pool %s (%s, NAD %s), reservations: %s", phase, pp.want.Name, p.report.Pools[pp.entry].Action,
		strings.Join(slices.Compact(nads), ", "), strings.Join(counts, ", "))
}
