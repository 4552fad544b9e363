package migrate

import "slices"

// Action is what the migration does, or would do, with one pool or address.
type Action string

const (
	// ActionCreate: netpool does not hold it yet; a dry run would create it.
	ActionCreate Action = "create"
	// ActionCreated: --apply created it.
	ActionCreated Action = "created"
	// ActionUnchanged: netpool already holds it for the same owner (migrated before).
	ActionUnchanged Action = "unchanged"
	// ActionConflict: netpool holds it for another owner; it is left as it is.
	ActionConflict Action = "conflict"
	// ActionSkipped: nothing to import (a whereabouts leak: its pod is gone, or nothing
	// references it); see the reason.
	ActionSkipped Action = "skipped"
	// ActionInvalid: whereabouts' record or the NAD cannot be read or imported; see the reason.
	ActionInvalid Action = "invalid"
)

// Report is what one run of netpoolctl migrate whereabouts found and did. Its JSON and YAML form
// is a stable schema (docs/migrate-from-whereabouts.md).
type Report struct {
	// Applied is whether the run wrote (--apply, and nothing blocked it).
	Applied bool `json:"applied"`
	// NADs are the whereabouts IPAM sections of NADs, one entry each, with what to change.
	NADs []NAD `json:"nads"`
	// Pools are the netpool IPPools the NADs' ranges derive.
	Pools []Pool `json:"pools"`
	// Allocations are whereabouts' allocations, one entry per address.
	Allocations []Allocation `json:"allocations"`
	// Findings are whereabouts objects that are not an allocation of a NAD's range.
	Findings []Finding `json:"findings"`
	// Discrepancies are the verify step's: after the run's writes, every address a live
	// whereabouts allocation holds that netpool gives to another attachment too, or does not hold.
	Discrepancies []Discrepancy `json:"discrepancies"`
	Summary       Summary       `json:"summary"`
}

// NAD is one whereabouts IPAM section of a NetworkAttachmentDefinition.
type NAD struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Path locates the section in spec.config, e.g. "ipam" or "plugins[0].ipam".
	Path string `json:"path"`
	// Network is the config's CNI network name ("name"); NetworkName its network_name.
	Network     string `json:"network,omitempty"`
	NetworkName string `json:"networkName,omitempty"`
	// Change is the edit that switches the section to netpool.
	Change string `json:"change,omitempty"`
	// Pools are the netpool IPPools of the section's ranges.
	Pools []string `json:"pools,omitempty"`
	// Kept counts the attachments of those pools that are (or, in a dry run, would be) imported,
	// so keep their addresses after the switch: no address moves.
	Kept int `json:"kept"`
	// Note is something the operator must check before switching.
	Note string `json:"note,omitempty"`
	// Switched is set when the section already said netpool: the run verifies and imports what
	// whereabouts still holds of its ranges. SwitchedNow is set when --switch-nads switched it.
	Switched    bool `json:"switched,omitempty"`
	SwitchedNow bool `json:"switchedNow,omitempty"`
	// Error is why the section cannot be migrated; the run writes nothing while one is set.
	Error string `json:"error,omitempty"`
}

// Pool is a netpool IPPool derived from a NAD's range.
type Pool struct {
	Name        string `json:"name"`
	Range       string `json:"range"`
	NetworkName string `json:"networkName,omitempty"`
	// Whereabouts is the whereabouts IPPool (namespace/name) whose allocations it takes, if any.
	Whereabouts string `json:"whereabouts,omitempty"`
	// Locked is set when whereabouts' IPPool is locked (--switch-nads): whereabouts can no longer
	// allocate from it.
	Locked bool   `json:"locked,omitempty"`
	Action Action `json:"action"`
	Reason string `json:"reason,omitempty"`
}

// Allocation is one address whereabouts handed out.
type Allocation struct {
	Address string `json:"address,omitempty"`
	// Pool is the netpool IPPool and Reservation the OverlappingRangeIPReservation that holds it.
	Pool        string `json:"pool,omitempty"`
	Reservation string `json:"reservation,omitempty"`
	// Whereabouts is the allocation in whereabouts: namespace/IPPool[offset].
	Whereabouts string `json:"whereabouts"`
	Pod         string `json:"pod,omitempty"`
	PodUID      string `json:"podUID,omitempty"`
	Node        string `json:"node,omitempty"`
	ContainerID string `json:"containerID,omitempty"`
	IfName      string `json:"ifName,omitempty"`
	// Network is the CNI network name recorded on the reservation (what GC matches on).
	Network string `json:"network,omitempty"`
	Action  Action `json:"action"`
	Reason  string `json:"reason,omitempty"`
}

// Finding is a whereabouts object the migration does not import, and why.
type Finding struct {
	// Object is kind namespace/name.
	Object string `json:"object"`
	Action Action `json:"action"`
	Reason string `json:"reason"`
}

// Summary counts the entries of each action, pools and allocations together.
type Summary struct {
	Create    int `json:"create"`
	Created   int `json:"created"`
	Unchanged int `json:"unchanged"`
	Conflicts int `json:"conflicts"`
	Skipped   int `json:"skipped"`
	Invalid   int `json:"invalid"`
	// HeldTwice and WhereaboutsOnly count the discrepancies of each kind.
	HeldTwice       int `json:"heldTwice"`
	WhereaboutsOnly int `json:"whereaboutsOnly"`
}

// Blocked reports whether the report holds a conflict or an invalid entry: --apply then writes
// nothing, and the command exits non-zero.
func (r *Report) Blocked() bool { return r.Summary.Conflicts > 0 || r.Summary.Invalid > 0 }

// Failed reports whether the command exits non-zero: Blocked, or an address is held twice.
func (r *Report) Failed() bool { return r.Blocked() || r.Summary.HeldTwice > 0 }

func (r *Report) count() {
	s := Summary{}
	add := func(a Action) {
		switch a {
		case ActionCreate:
			s.Create++
		case ActionCreated:
			s.Created++
		case ActionUnchanged:
			s.Unchanged++
		case ActionConflict:
			s.Conflicts++
		case ActionSkipped:
			s.Skipped++
		case ActionInvalid:
			s.Invalid++
		}
	}
	for _, p := range r.Pools {
		add(p.Action)
	}
	for _, a := range r.Allocations {
		add(a.Action)
	}
	for _, f := range r.Findings {
		add(f.Action)
	}
	for _, d := range r.Discrepancies {
		switch d.Kind {
		case KindHeldTwice:
			s.HeldTwice++
		case KindWhereaboutsOnly:
			s.WhereaboutsOnly++
		}
	}
	for i := range r.NADs {
		n := &r.NADs[i]
		if n.Error != "" {
			s.Invalid++
		}
		n.Kept = 0
		for _, a := range r.Allocations {
			if slices.Contains(n.Pools, a.Pool) && (a.Action == ActionCreate || a.Action == ActionCreated || a.Action == ActionUnchanged) {
				n.Kept++
			}
		}
	}
	r.Summary = s
}
