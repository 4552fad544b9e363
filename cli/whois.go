package cli

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/cobra"

	"github.com/netpool/netpool/cli/inventory"
	"github.com/netpool/netpool/internal/ippool"
)

// whoisStates are the STATE of a whois row: Held, or what the pool's range makes the address
// (ippool.Classify): Free, Excluded, Gateway, Reserved (network or broadcast), OutsideWindow.
const (
	stateHeld = "Held"
	stateFree = "Free"
	// stateUnknown: the pool's range is unknown (see its rangeError), so only its CIDR is.
	stateUnknown = "Unknown"
)

// whoisDoc is the document of whois.
type whoisDoc struct {
	docHeader
	Address string      `json:"address"`
	Matches []whoisView `json:"matches"`
}

// whoisView is what the address is to one pool.
type whoisView struct {
	Pool    string `json:"pool"`
	Network string `json:"network,omitempty"`
	State   string `json:"state"`
	// Detail names the range, window, exclusion or holder that decides the state.
	Detail string          `json:"detail,omitempty"`
	Holder *allocationView `json:"holder,omitempty"`
}

func newWhois(opts *options) *cobra.Command {
	return &cobra.Command{
		Use:   "whois IP",
		Short: "Say who holds an address, or why it is free, excluded, the gateway or outside every pool",
		Long: `whois names the holder of an address: its pool, pod, interface, node and since when. For every
pool whose range contains the address and that does not hold it, it says what the address is to
the pool, naming the range, window or exclusion that decides it: Free, Excluded, Gateway,
Reserved (the network or broadcast address) or OutsideWindow (before rangeStart or after
rangeEnd). An address that another pool of the same network holds is Held there too: a network
is one address space. An address outside every pool is an error. -o json and -o yaml print the
Whois document of docs/cli-output.md.

    $ netpoolctl whois 10.78.0.2
    ADDRESS     POOL        STATE   POD             INTERFACE   NODE     AGE   DETAIL
    10.78.0.2   ctlview-a   Held    ctlview/web-0   net1        node-a   10h   <none>

    $ netpoolctl whois 10.78.0.9
    ADDRESS     POOL        STATE      POD      INTERFACE   NODE     AGE      DETAIL
    10.78.0.9   ctlview-a   Excluded   <none>   <none>      <none>   <none>   10.78.0.9 is excluded from range 10.78.0.0/28 by 10.78.0.8-10.78.0.11`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := parseFormat(opts.output)
			if err != nil {
				return err
			}
			addr, err := parseAddrArg(args[0])
			if err != nil {
				return err
			}
			src, err := opts.source()
			if err != nil {
				return err
			}
			defer src.Close()
			pools, err := src.Pools(cmd.Context())
			if err != nil {
				return err
			}
			as, err := src.Allocations(cmd.Context(), "")
			if err != nil {
				return err
			}
			matches := whois(addr, pools, as)
			if len(matches) == 0 {
				return outsideEveryPool(addr, pools)
			}
			now := opts.now()
			doc := whoisDoc{docHeader: newDocHeader("Whois", src), Address: addr.String(), Matches: matches}
			t := &table{columns: []column{
				{header: "address"}, {header: "pool"}, {header: "state"}, {header: "pod"}, {header: "interface"},
				{header: "node"}, {header: "network", wide: true}, {header: "container", wide: true}, {header: "pod uid", wide: true},
				{header: "age"}, {header: "detail"},
			}}
			for _, m := range matches {
				h := allocationView{}
				since := ""
				if m.Holder != nil {
					h = *m.Holder
					if h.Created != nil {
						since = age(now, *h.Created)
					}
				}
				pod := ""
				if h.Pod != "" {
					pod = h.Namespace + "/" + h.Pod
				}
				t.add(addr.String(), m.Pool, m.State, pod, h.Interface, h.Node, m.Network, h.ContainerID, h.PodUID, since, m.Detail)
			}
			return emit(cmd.OutOrStdout(), f, t, doc)
		},
	}
}

// parseAddrArg parses an address argument.
func parseAddrArg(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address (want e.g. 10.1.0.2 or fd00::2)", s)
	}
	return a.Unmap(), nil
}

// whois says what addr is to every pool whose range holds it, holders first.
func whois(addr netip.Addr, pools []inventory.Pool, as []inventory.Allocation) []whoisView {
	var out []whoisView
	heldIn := map[string]bool{}
	networkOf := map[string]string{}
	for _, p := range pools {
		networkOf[p.Name] = p.Network
	}
	var holders []inventory.Allocation
	for _, a := range as {
		if a.Address == addr {
			holders = append(holders, a)
			heldIn[a.Pool] = true
			v := viewOfAllocation(a)
			out = append(out, whoisView{Pool: a.Pool, Network: networkOf[a.Pool], State: stateHeld, Holder: &v})
		}
	}
	for _, p := range pools {
		if heldIn[p.Name] {
			continue
		}
		if p.Model == nil {
			if p.Subnet.Contains(addr) {
				out = append(out, whoisView{Pool: p.Name, Network: p.Network, State: stateUnknown,
					Detail: fmt.Sprintf("%s is in range %s, whose window and exclusions are unknown: %s", addr, p.Subnet, p.RangeErr)})
			}
			continue
		}
		class, reason := p.Model.Classify(addr)
		if class == ippool.AddressOutside {
			continue
		}
		m := whoisView{Pool: p.Name, Network: p.Network, State: string(class), Detail: reason}
		if class == ippool.AddressUsable {
			m.State, m.Detail = stateFree, fmt.Sprintf("%s is in the window %s-%s of range %s", addr, p.Model.Range.Start, p.Model.Range.End, p.Model.Range.Subnet)
			for _, h := range holders {
				if networkOf[h.Pool] == p.Network {
					v := viewOfAllocation(h)
					m.State, m.Detail, m.Holder = stateHeld, "held through pool "+h.Pool+", which shares the network's address space", &v
					break
				}
			}
		}
		if m.State == stateFree && p.NotServing != "" {
			m.Detail += ", but the pool hands out nothing now: " + p.NotServing
		}
		out = append(out, m)
	}
	return out
}

// outsideEveryPool is whois's error for an address no pool's range holds.
func outsideEveryPool(addr netip.Addr, pools []inventory.Pool) error {
	var ranges []string
	for _, p := range pools {
		if p.Subnet.IsValid() {
			ranges = append(ranges, p.Name+" ("+p.Subnet.String()+")")
		}
	}
	return fmt.Errorf("%s is outside every pool: %s", addr, poolNames(ranges))
}
