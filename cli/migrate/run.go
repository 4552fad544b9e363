package migrate

import (
	"context"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/ippool"
	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/internal/reservation"
)

// Options of a run.
type Options struct {
	// Apply writes; without it the run is a dry run that changes nothing.
	Apply bool
	// SwitchNADs (implies Apply) locks whereabouts' pools of the NADs, imports again, and switches
	// each NAD's whereabouts sections to netpool: the switch with no window (switch.go).
	SwitchNADs bool
	// WhereaboutsNamespace is where a whereabouts IPPool that does not exist yet is created
	// locked: the namespace of whereabouts' kubeconfig context (kube-system by default).
	WhereaboutsNamespace string
	// Namespace limits the run to the NADs of one namespace; empty means every namespace.
	Namespace string
	// Agents are the directories the node agents serve; DefaultAgentDirs when empty.
	Agents AgentDirs
	// Progress, when set, gets a line per NAD and per pool as the run goes (netpoolctl: stderr).
	Progress io.Writer
}

// Run imports whereabouts' allocations into netpool, or with Apply unset says what it would do,
// and then verifies: every address a live whereabouts allocation holds in a netpool pool must be
// held by netpool for the same attachment (Report.Discrepancies).
//
// Every object is first created with a server-side dry run, so the API server's own validation,
// and AlreadyExists for what netpool already holds, decide each entry; an existing reservation of
// the same attachment on the same node is a migration done before (unchanged), of anyone else a
// conflict. With Apply, and only when that pass found no conflict and nothing invalid, the same
// objects are created for real: pools first, so no reservation ever names a missing pool. Nothing
// existing is ever changed or deleted (but for SwitchNADs' lock and switch), so a second run
// changes nothing.
func Run(ctx context.Context, c kubeclient.Client, o Options) (*Report, error) {
	if o.SwitchNADs {
		o.Apply = true
	}
	if len(o.Agents.Config) == 0 && len(o.Agents.Log) == 0 {
		o.Agents = DefaultAgentDirs()
	}
	pr := newProgress(o.Progress)
	p, err := planRun(ctx, c, o, pr)
	if err != nil {
		return nil, err
	}
	if o.Apply && !p.report.Blocked() {
		if o.SwitchNADs {
			if p, err = switchNADs(ctx, c, o, p); err != nil {
				if p == nil {
					return nil, err
				}
				p.report.count()
				return p.report, err
			}
		} else {
			p.report.Applied = true
			if err := p.write(ctx, c, false); err != nil {
				p.report.count()
				return p.report, err
			}
		}
	}
	if err := p.verify(ctx, c); err != nil {
		p.report.count()
		return p.report, err
	}
	p.report.count()
	return p.report, nil
}

// planRun reads the cluster, plans, and checks the plan with a server-side dry run of each write.
func planRun(ctx context.Context, c kubeclient.Client, o Options, pr progress) (*plan, error) {
	s, err := read(ctx, c, o.Namespace)
	if err != nil {
		return nil, err
	}
	pr.say("read %d NetworkAttachmentDefinitions, %d whereabouts IPPools, %d OverlappingRangeIPReservations",
		len(s.nads), len(s.pools)+len(s.unreadable), len(s.reservations))
	p, err := newPlan(ctx, c, s, o.Namespace != "", o.Agents)
	if err != nil {
		return nil, err
	}
	p.nads = s.nads
	p.progress = pr
	p.planned()
	if err := p.write(ctx, c, true); err != nil {
		return nil, err
	}
	p.report.count()
	return p, nil
}

// verify fills Report.Discrepancies: Verify's, of the run's pools when it is limited to a namespace.
func (p *plan) verify(ctx context.Context, c kubeclient.Reader) error {
	v, err := Verify(ctx, c)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	p.progress.say("verified %d whereabouts allocations in netpool pools: %d discrepancies", v.Holdings, len(v.Discrepancies))
	mine := map[string]bool{}
	for _, pl := range p.report.Pools {
		mine[pl.Name] = true
	}
	for _, d := range v.Discrepancies {
		if !p.scoped || mine[d.Pool] {
			p.report.Discrepancies = append(p.report.Discrepancies, d)
		}
	}
	return nil
}

// write creates what the plan holds as ActionCreate: with dry set, as a server-side dry run.
func (p *plan) write(ctx context.Context, c kubeclient.Client, dry bool) error {
	var opts []kubeclient.CreateOption
	if dry {
		opts = append(opts, kubeclient.DryRunAll)
	}
	done := ActionCreated
	if dry {
		done = ActionCreate
	}
	for _, pp := range p.pools {
		e := &p.report.Pools[pp.entry]
		if e.Action != ActionCreate {
			continue
		}
		err := c.Create(ctx, pp.want.DeepCopy(), opts...)
		switch {
		case err == nil:
			e.Action = done
		case apierrors.IsAlreadyExists(err):
			// Created since the plan was made (by the agent's first ADD, say): judge it again.
			have := &ipamv1.IPPool{}
			if gerr := c.Get(ctx, kubeclient.ObjectKey{Name: pp.want.Name}, have); gerr != nil {
				return fmt.Errorf("failed to read IPPool %s: %w", pp.want.Name, gerr)
			}
			e.Action = ActionUnchanged
			if cerr := checkPool(have, pp); cerr != nil {
				e.Action, e.Reason = ActionConflict, cerr.Error()
			}
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			e.Action, e.Reason = ActionInvalid, err.Error()
		default:
			return createError("IPPool "+pp.want.Name, dry, err)
		}
	}
	// The reservations are planned pool by pool: each pool is said once its last is written.
	var last *poolPlan
	actions := map[Action]int{}
	said := map[*poolPlan]bool{}
	flush := func() {
		if last != nil {
			p.wrote(last, dry, actions)
			said[last] = true
			clear(actions)
		}
	}
	for _, r := range p.res {
		if r.pool != last {
			flush()
			last = r.pool
		}
		e := &p.report.Allocations[r.entry]
		if e.Action != ActionCreate {
			actions[e.Action]++
			continue
		}
		if pe := p.report.Pools[r.pool.entry].Action; pe == ActionConflict || pe == ActionInvalid {
			continue
		}
		err := c.Create(ctx, r.want.DeepCopy(), opts...)
		switch {
		case err == nil:
			e.Action = done
		case apierrors.IsAlreadyExists(err):
			have := &ipamv1.OverlappingRangeIPReservation{}
			if gerr := c.Get(ctx, kubeclient.ObjectKey{Name: r.want.Name}, have); gerr != nil {
				return fmt.Errorf("failed to read reservation %s: %w", r.want.Name, gerr)
			}
			if reservation.OwnedBy(have, r.want.Spec.Node, r.want.Spec.Pool, r.owner) {
				e.Action = ActionUnchanged
			} else {
				e.Action, e.Reason = ActionConflict, "netpool already gives it to "+reservation.Holder(have)
			}
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			e.Action, e.Reason = ActionInvalid, err.Error()
		default:
			return createError("reservation "+r.want.Name, dry, err)
		}
		actions[e.Action]++
	}
	flush()
	for _, pp := range p.pools {
		if !said[pp] {
			p.wrote(pp, dry, actions) // no reservation of its own: actions is empty
		}
	}
	return nil
}

// checkPool checks that have, the IPPool found under pp's name, is pp's pool in pp's mode, the
// mode that named pp's reservations.
func checkPool(have *ipamv1.IPPool, pp *poolPlan) error {
	if err := ippool.CheckDerivedFor(have, pp.cfg.NetworkName, pp.rng); err != nil {
		return err
	}
	overlap, err := ippool.ResolveOverlapping(have, pp.cfg)
	if err != nil {
		return err
	}
	if overlap != pp.overlap {
		return fmt.Errorf("IPPool %s changed its overlappingRanges during the run: run again", have.Name)
	}
	return nil
}

// createError explains a failed Create; a refused dry run says that it needs the create verb too.
func createError(what string, dry bool, err error) error {
	if dry && apierrors.IsForbidden(err) {
		return fmt.Errorf("failed to create %s in a server-side dry run: %w (the dry run needs create on ippools and "+
			"overlappingrangeipreservations.ipam.netpool.io, as --apply does, since the API server validates each object)", what, err)
	}
	verb := "create"
	if dry {
		verb = "create (dry run)"
	}
	return fmt.Errorf("failed to %s %s: %w", verb, what, err)
}
