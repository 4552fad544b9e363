package cli

import (
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/netpool/netpool/cli/inventory"
)

// The json and yaml documents of the inspecting commands. They are a stable, documented schema
// (docs/cli-output.md): fields are only ever added. Every document names its schema version, its
// kind and where it was read from.

// schemaVersion is the apiVersion of every document.
const schemaVersion = "netpoolctl.netpool.io/v1"

// docHeader opens every document.
type docHeader struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Source is "cluster" or "bbolt".
	Source string `json:"source"`
}

func newDocHeader(kind string, src inventory.Source) docHeader {
	return docHeader{APIVersion: schemaVersion, Kind: kind, Source: src.Kind()}
}

// poolView is one pool.
type poolView struct {
	Name    string `json:"name"`
	Network string `json:"network,omitempty"`
	// Range is the pool's CIDR; RangeStart and RangeEnd its window, always written out.
	Range      string   `json:"range,omitempty"`
	RangeStart string   `json:"rangeStart,omitempty"`
	RangeEnd   string   `json:"rangeEnd,omitempty"`
	Gateway    string   `json:"gateway,omitempty"`
	Exclude    []string `json:"exclude,omitempty"`
	// Capacity and Free are decimal strings: an IPv6 pool holds more than an int64 counts.
	Capacity string `json:"capacity,omitempty"`
	Used     int64  `json:"used"`
	// UsedFrom says what Used counts: "reservations" (counted now) or "status" (the controller's
	// status.allocated).
	UsedFrom string `json:"usedFrom,omitempty"`
	Free     string `json:"free,omitempty"`
	// UtilizationPercent is used/capacity in percent, rounded to one decimal.
	UtilizationPercent *float64 `json:"utilizationPercent,omitempty"`
	// Ready is the IPPool's Ready condition (cluster only).
	Ready string `json:"ready,omitempty"`
	// Exhausted is true when the pool has no free address now (free is 0 of a known capacity).
	Exhausted bool `json:"exhausted,omitempty"`
	// NotServing says why the pool hands out no address now (cluster only).
	NotServing string `json:"notServing,omitempty"`
	// RangeError says why the range, and so capacity and free, is unknown.
	RangeError string     `json:"rangeError,omitempty"`
	Created    *time.Time `json:"created,omitempty"`
}

type poolList struct {
	docHeader
	Items []poolView `json:"items"`
}

// allocationView is one held address.
type allocationView struct {
	Address     string `json:"address"`
	Pool        string `json:"pool"`
	Namespace   string `json:"namespace,omitempty"`
	Pod         string `json:"pod,omitempty"`
	PodUID      string `json:"podUID,omitempty"`
	ContainerID string `json:"containerID"`
	Interface   string `json:"interface"`
	Node        string `json:"node,omitempty"`
	// Network is the CNI network name, as CNINetwork; kept for the documents written before
	// CNINetwork (a network column is the network_name everywhere else).
	Network string `json:"network,omitempty"`
	// CNINetwork is the CNI network name of the attachment (the network config's "name").
	CNINetwork string `json:"cniNetwork,omitempty"`
	// NetworkName is the network_name of the address scope (the pool's).
	NetworkName string `json:"networkName,omitempty"`
	// Holder is who holds the address, as the tables print it: the pod, else the container ID
	// shortened as crictl does.
	Holder string `json:"holder"`
	// Owner is the persistent owner (an IPAMClaim, a sticky StatefulSet's ordinal), if any.
	Owner *inventory.Owner `json:"owner,omitempty"`
	// Reservation is the OverlappingRangeIPReservation's name (cluster only).
	Reservation string     `json:"reservation,omitempty"`
	Created     *time.Time `json:"created,omitempty"`
}

// sliceView is one node's block of a pool.
type sliceView struct {
	Name    string     `json:"name"`
	Range   string     `json:"range"`
	Node    string     `json:"node"`
	Used    int64      `json:"used"`
	Created *time.Time `json:"created,omitempty"`
}

func docTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func viewOfPool(p inventory.Pool) poolView {
	v := poolView{Name: p.Name, Network: p.Network, Used: p.Used, UsedFrom: p.UsedFrom, Ready: p.Ready, NotServing: p.NotServing, RangeError: p.RangeErr, Created: docTime(p.Created)}
	if p.Model == nil {
		if p.Subnet.IsValid() {
			v.Range = p.Subnet.String()
		}
		return v
	}
	r := p.Model.Range
	v.Range, v.RangeStart, v.RangeEnd = r.Subnet.String(), r.Start.String(), r.End.String()
	if r.Gateway.IsValid() {
		v.Gateway = r.Gateway.String()
	}
	v.Exclude = r.ExcludedCIDRs()
	capacity := p.Model.Capacity()
	v.Capacity = capacity.String()
	free := new(big.Int).Sub(capacity, big.NewInt(p.Used))
	if free.Sign() < 0 {
		free.SetInt64(0) // more held than the range now allows: `netpoolctl check` names them
	}
	v.Free = free.String()
	v.Exhausted = capacity.Sign() > 0 && free.Sign() == 0
	if capacity.Sign() > 0 {
		pct, _ := new(big.Float).Quo(new(big.Float).SetInt64(p.Used*1000), new(big.Float).SetInt(capacity)).Float64()
		pct = float64(int64(pct+0.5)) / 10
		v.UtilizationPercent = &pct
	}
	return v
}

func viewOfAllocation(a inventory.Allocation) allocationView {
	return allocationView{
		Address: a.Address.String(), Pool: a.Pool, Namespace: a.Namespace, Pod: a.PodName, PodUID: a.PodUID,
		ContainerID: a.ContainerID, Interface: a.Interface, Node: a.Node, Network: a.Network, CNINetwork: a.Network,
		NetworkName: a.NetworkName, Holder: holderOf(a), Owner: a.Owner, Reservation: a.Reservation, Created: docTime(a.Created),
	}
}

// shortIDLength is how much of a container ID crictl and docker print.
const shortIDLength = 13

// holderOf names who holds a: its pod, else (a bare host, where CNI_ARGS names no pod) its
// container ID shortened as crictl prints it.
func holderOf(a inventory.Allocation) string {
	if pod := a.Pod(); pod != "" {
		return pod
	}
	id := a.ContainerID
	if len(id) > shortIDLength {
		id = id[:shortIDLength]
	}
	if id == "" {
		return ""
	}
	return "container " + id
}

// ownerText is the persistent owner for a table, "" without one.
func ownerText(o *inventory.Owner) string {
	if o == nil {
		return ""
	}
	return o.String()
}

// humanCount prints a count for a table: exact up to six digits, else to three significant
// digits with an SI suffix (an IPv6 /64 holds 18.4E); the documents keep the exact number.
func humanCount(s string) string {
	n, ok := new(big.Int).SetString(s, 10)
	if !ok || n.Cmp(big.NewInt(999_999)) <= 0 {
		return s
	}
	f := new(big.Float).SetInt(n)
	for _, suffix := range []string{"k", "M", "G", "T", "P", "E", "Z", "Y"} {
		f.Quo(f, big.NewFloat(1000))
		if f.Cmp(big.NewFloat(999.5)) < 0 {
			v, _ := f.Float64()
			switch {
			case v < 9.995:
				return fmt.Sprintf("%.2f%s", v, suffix)
			case v < 99.95:
				return fmt.Sprintf("%.1f%s", v, suffix)
			}
			return fmt.Sprintf("%.0f%s", v, suffix)
		}
	}
	v, _ := new(big.Float).SetInt(n).Float64()
	return fmt.Sprintf("~2^%.0f", math.Log2(v))
}

func viewOfSlice(s inventory.Slice) sliceView {
	return sliceView{Name: s.Name, Range: s.Range.String(), Node: s.Node, Used: s.Used, Created: docTime(s.Created)}
}

// utilization prints a pool's utilisation for a table.
func utilization(v poolView) string {
	if v.UtilizationPercent == nil {
		return ""
	}
	if v.Exhausted {
		// READY says so in a cluster; an embedded store has no condition, and a table must say it.
		return fmt.Sprintf("%.1f%% (Exhausted)", *v.UtilizationPercent)
	}
	return fmt.Sprintf("%.1f%%", *v.UtilizationPercent)
}
