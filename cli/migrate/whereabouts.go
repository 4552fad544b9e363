package migrate

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/netip"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/netpool/netpool/ipam"
)

// whereabouts' kinds, read as unstructured.
var (
	wbPoolList        = schema.GroupVersionKind{Group: "whereabouts.cni.cncf.io", Version: "v1alpha1", Kind: "IPPoolList"}
	wbReservationList = schema.GroupVersionKind{Group: "whereabouts.cni.cncf.io", Version: "v1alpha1", Kind: "OverlappingRangeIPReservationList"}
)

// maxAllocations bounds the allocations read from one whereabouts IPPool: etcd's 1.5 MiB object
// limit holds about 10,000 of them, so more means the object is not what whereabouts writes.
const maxAllocations = 100000

// wbPool is a whereabouts IPPool: a range and its allocations, keyed in whereabouts by the
// address's offset from the range's network address.
type wbPool struct {
	Namespace, Name string
	Range           netip.Prefix
	// Locked is set when netpoolctl locked the pool (spec.range holds lockedRangePrefix and the
	// range): whereabouts can no longer allocate from it (lock.go).
	Locked      bool
	Allocations []wbAllocation
	// Problems are the allocations that cannot be read.
	Problems []wbProblem
}

// wbProblem is an allocation that cannot be read, and why.
type wbProblem struct {
	Key, Reason string
}

// wbAllocation is one entry of spec.allocations.
type wbAllocation struct {
	Key         string // the offset, as whereabouts wrote it
	Addr        netip.Addr
	ContainerID string
	PodRef      string // namespace/name
	IfName      string
}

// allocationID names allocation key of p for the report: namespace/pool[offset].
func (p *wbPool) allocationID(key string) string {
	return fmt.Sprintf("%s/%s[%s]", p.Namespace, p.Name, key)
}

// wbReservation is a whereabouts OverlappingRangeIPReservation, the cluster-wide lock of one
// address of one network; whereabouts v0.9 records no container ID in it.
type wbReservation struct {
	Namespace, Name string
	PodRef, IfName  string
}

type wbPoolWire struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Range       string `json:"range"`
		Allocations map[string]struct {
			ID     string `json:"id"`
			PodRef string `json:"podref"`
			IfName string `json:"ifname"`
		} `json:"allocations"`
	} `json:"spec"`
}

// parsePool decodes a whereabouts IPPool (its JSON). An error means the pool as a whole cannot be
// read (its range); an allocation that cannot be read is recorded in Problems, so the report names
// every one of them.
func parsePool(data []byte) (*wbPool, error) {
	var w wbPoolWire
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("cannot decode a whereabouts IPPool: %v", err)
	}
	p := &wbPool{Namespace: w.Metadata.Namespace, Name: w.Metadata.Name}
	id := p.Namespace + "/" + p.Name
	text, locked := strings.CutPrefix(strings.TrimSpace(w.Spec.Range), lockedRangePrefix)
	p.Locked = locked
	prefix, err := netip.ParsePrefix(text)
	if err != nil {
		return p, fmt.Errorf("whereabouts IPPool %s: spec.range %q is not a CIDR", id, w.Spec.Range)
	}
	p.Range = prefix.Masked()
	if len(w.Spec.Allocations) > maxAllocations {
		return p, fmt.Errorf("whereabouts IPPool %s: %d allocations, more than the %d one object can hold", id, len(w.Spec.Allocations), maxAllocations)
	}
	keys := make([]string, 0, len(w.Spec.Allocations))
	for k := range w.Spec.Allocations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a := w.Spec.Allocations[k]
		addr, err := offsetAddr(p.Range, k)
		if err != nil {
			p.Problems = append(p.Problems, wbProblem{k, fmt.Sprintf("allocation %q: %v", k, err)})
			continue
		}
		if a.ID == "" || a.PodRef == "" || a.IfName == "" {
			p.Problems = append(p.Problems, wbProblem{k, fmt.Sprintf("allocation %q (%s): id, podref and ifname are all needed to release it on DEL (id %q, podref %q, ifname %q)",
				k, addr, a.ID, a.PodRef, a.IfName)})
			continue
		}
		p.Allocations = append(p.Allocations, wbAllocation{Key: k, Addr: addr, ContainerID: a.ID, PodRef: a.PodRef, IfName: a.IfName})
	}
	sort.Slice(p.Allocations, func(i, j int) bool { return p.Allocations[i].Addr.Less(p.Allocations[j].Addr) })
	return p, nil
}

// offsetAddr is whereabouts' address of allocation key: the range's network address plus the
// decimal offset key, which must stay inside the range.
func offsetAddr(r netip.Prefix, key string) (netip.Addr, error) {
	if key == "" || strings.TrimLeft(key, "0123456789") != "" || len(key) > 40 {
		return netip.Addr{}, fmt.Errorf("the key is not a decimal offset")
	}
	off, ok := new(big.Int).SetString(key, 10)
	if !ok {
		return netip.Addr{}, fmt.Errorf("the key is not a decimal offset")
	}
	base := r.Addr().As16()
	n := new(big.Int).SetBytes(base[:])
	n.Add(n, off)
	if n.BitLen() > 128 {
		return netip.Addr{}, fmt.Errorf("offset %s lies outside range %s", key, r)
	}
	var b [16]byte
	n.FillBytes(b[:])
	a := netip.AddrFrom16(b)
	if r.Addr().Is4() {
		a = a.Unmap()
	}
	if !r.Contains(a) {
		return netip.Addr{}, fmt.Errorf("offset %s lies outside range %s", key, r)
	}
	return a, nil
}

type wbReservationWire struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		PodRef string `json:"podref"`
		IfName string `json:"ifname"`
	} `json:"spec"`
}

func parseReservation(data []byte) (wbReservation, error) {
	var w wbReservationWire
	if err := json.Unmarshal(data, &w); err != nil {
		return wbReservation{}, fmt.Errorf("cannot decode a whereabouts OverlappingRangeIPReservation: %v", err)
	}
	return wbReservation{Namespace: w.Metadata.Namespace, Name: w.Metadata.Name, PodRef: w.Spec.PodRef, IfName: w.Spec.IfName}, nil
}

// wbPoolName is whereabouts' name of the IPPool of subnet in network networkName (its
// IPPoolName without node slices): "<network>-<range>", every ':' and '/' of the range made '-'.
func wbPoolName(networkName string, subnet netip.Prefix) string {
	name := wbNormalise(subnet.String())
	if networkName != "" {
		name = networkName + "-" + name
	}
	return name
}

// wbReservationName is whereabouts' name of the OverlappingRangeIPReservation of addr in network
// networkName (its NormalizeIP): "<network>-<address>", every ':' made '-'.
func wbReservationName(networkName string, addr netip.Addr) string {
	name := wbNormalise(addr.String())
	if networkName != "" {
		name = networkName + "-" + name
	}
	return name
}

// wbNetworkOf is the network_name of whereabouts IPPool name, whose range is subnet: the name
// less "-<range>" (wbPoolName's inverse); ok is false for a name of another form (a node slice's
// pool, say).
func wbNetworkOf(name string, subnet netip.Prefix) (string, bool) {
	suffix := wbNormalise(subnet.String())
	if name == suffix {
		return "", true
	}
	network, ok := strings.CutSuffix(name, "-"+suffix)
	if !ok || network == "" {
		return "", false
	}
	return network, true
}

func wbNormalise(s string) string {
	if strings.HasSuffix(s, ":") {
		s += "0"
	}
	s = strings.ReplaceAll(s, ":", "-")
	return strings.ReplaceAll(s, "/", "-")
}

// splitPodRef splits whereabouts' "namespace/name".
func splitPodRef(ref string) (ipam.PodRef, bool) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return ipam.PodRef{}, false
	}
	return ipam.PodRef{Namespace: ns, Name: name}, true
}
