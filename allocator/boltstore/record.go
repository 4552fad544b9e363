package boltstore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/ipam"
)

// record is the stored form of an allocation's holder; the pool and address are its keys.
type record struct {
	ContainerID string    `json:"c"`
	IfName      string    `json:"i"`
	Network     string    `json:"n,omitempty"`
	PodNS       string    `json:"pns,omitempty"`
	PodName     string    `json:"pn,omitempty"`
	PodUID      string    `json:"pu,omitempty"`
	Scope       string    `json:"s,omitempty"`
	Created     time.Time `json:"t"`
	// Persistent is the address's persistent owner (persistent.go), when it has one.
	Persistent string `json:"po,omitempty"`
}

func encodeRecord(a *allocator.Allocation) ([]byte, error) {
	return json.Marshal(record{
		ContainerID: a.Owner.ContainerID, IfName: a.Owner.IfName, Network: a.Network,
		PodNS: a.Pod.Namespace, PodName: a.Pod.Name, PodUID: a.Pod.UID,
		Scope: a.Scope, Created: a.Created, Persistent: a.Persistent,
	})
}

func decodeRecord(pool string, k, v []byte) (allocator.Allocation, error) {
	var r record
	if err := json.Unmarshal(v, &r); err != nil {
		return allocator.Allocation{}, fmt.Errorf("%w: corrupt allocation record of %s in pool %s: %w",
			allocator.ErrStoreUnusable, addr(k), pool, err)
	}
	return allocator.Allocation{
		Pool: pool, Addr: addr(k),
		Owner:   allocator.Owner{ContainerID: r.ContainerID, IfName: r.IfName},
		Network: r.Network, Pod: ipam.PodRef{Namespace: r.PodNS, Name: r.PodName, UID: r.PodUID},
		Scope: r.Scope, Created: r.Created, Persistent: r.Persistent,
	}, nil
}

func ownerKey(pool string, o allocator.Owner) []byte {
	return []byte(pool + "\x00" + o.ContainerID + "\x00" + o.IfName)
}
