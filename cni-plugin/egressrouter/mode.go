package egressrouter

import (
	"net/netip"
	"strconv"

	"github.com/netpool/netpool/crds/network/v1/egressnad"
)

// Mode is what a router does with the traffic that arrives on its cluster interface. Each mode is a
// type that holds its own settings and builds its own part of the router, so a mode added to the
// NAD config (egressnad.Mode) is refused by Parse until it has a type here, and that type does not
// compile until it has every part.
type Mode interface {
	// Name is the mode as the EgressRouter API and the NAD config name it.
	Name() egressnad.Mode
	// validate checks the mode's settings against the router (its addresses, its families).
	validate(r *Router) error
	// chains is the router's whole nftables table, with egress interface egressIf.
	chains(r *Router, egressIf string) []chainSpec
}

// Redirect is the Redirect mode: each rule's port and protocol go to its destination and target
// port, and every other port of the fallback's family to the fallback.
type Redirect struct {
	Rules []Rule
	// Fallback, when valid, receives the traffic of its family that no rule matches.
	Fallback netip.Addr
}

// Name is ModeRedirect.
func (*Redirect) Name() egressnad.Mode { return egressnad.ModeRedirect }

// form is the config form a router was written in, so that the checks made after parsing (the
// node's own addresses, passthru on its uplink) name the fields as the author wrote them.
type form int

const (
	netpoolForm form = iota // the zero value: the reconciler's form
	openShiftForm
)

func (f form) modeField() string {
	if f == openShiftForm {
		return "interfaceArgs.mode"
	}
	return "interface.mode"
}

func (f form) masterField() string {
	if f == openShiftForm {
		return "interfaceArgs.master"
	}
	return "interface.master"
}

func (f form) addressField(i int) string {
	if f == openShiftForm {
		return "ip.addresses[" + strconv.Itoa(i) + "]"
	}
	return "addresses[" + strconv.Itoa(i) + "].ip"
}
