package kubestore

import (
	"net/netip"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// tombstoneTTL bounds how long the index remembers a reservation it deleted. The informer normally
// confirms the delete within milliseconds; an object created and deleted between two relists is
// never seen by the informer at all, so the tombstone must expire on its own.
const tombstoneTTL = 10 * time.Minute

// entry is one reservation of this node, as the index knows it.
type entry struct {
	name    string
	uid     types.UID
	pool    string // IPPool name
	addr    netip.Addr
	owner   allocator.Owner
	network string // CNI network name (ipamv1.NetworkAnnotation)
	netName string // spec.networkName, the address scope when overlapping ranges are on
	pod     ipam.PodRef
	created time.Time
	// persistent is the key of the reservation's persistent owner (spec.owner), "" for none.
	persistent string
	// users are the attachments bound to a persistently owned address (spec.users); the index
	// finds the entry under each of them.
	users []allocator.Owner
}

// owners are the attachments the index finds e under: its holder, and every bound user. A
// persistently owned address is found under its bound users only: an attachment that left it
// (DEL, a rolled back ADD) holds nothing there, even while it is still named as the holder.
func (e *entry) owners() []allocator.Owner {
	if e.persistent != "" {
		return e.users
	}
	out := []allocator.Owner{e.owner}
	for _, u := range e.users {
		if u != e.owner {
			out = append(out, u)
		}
	}
	return out
}

// persistentKey finds a persistently owned reservation of a pool.
type persistentKey struct {
	pool, owner string
}

type ownerKey struct {
	pool string
	allocator.Owner
}

// index is the write-through view of this node's reservations. The informer fills it and keeps it
// current with other actors' changes; the store's own writes update it at once, so a repeated ADD
// or a DEL right after an ADD never depends on how far the watch has got.
type index struct {
	mu      sync.Mutex
	byName  map[string]*entry
	byOwner map[ownerKey]map[string]*entry
	byAddr  map[netip.Addr][]*entry
	// byPersistent finds a pool's reservation of a persistent owner.
	byPersistent map[persistentKey]*entry
	// deleted holds the UIDs this store deleted, until the informer reports the delete (or
	// tombstoneTTL passes), so a late add event cannot bring a released reservation back.
	deleted map[types.UID]time.Time
	now     func() time.Time
	// deletedElsewhere, when set, is told of each reservation of the index that the informer saw
	// deleted without this store deleting it (the controller's GC, a forced release). It must not
	// block: the informer waits for it.
	deletedElsewhere func(entry)
}

func newIndex() *index {
	return &index{
		byName:       map[string]*entry{},
		byOwner:      map[ownerKey]map[string]*entry{},
		byAddr:       map[netip.Addr][]*entry{},
		byPersistent: map[persistentKey]*entry{},
		deleted:      map[types.UID]time.Time{},
		now:          time.Now,
	}
}

// entryOf converts a reservation; ok is false for an object that is not one of ours to track
// (its address does not parse).
func entryOf(r *ipamv1.OverlappingRangeIPReservation) (*entry, bool) {
	a, err := netip.ParseAddr(r.Spec.Address)
	if err != nil {
		return nil, false
	}
	e := &entry{
		name: r.Name, uid: r.UID, pool: r.Spec.Pool, addr: a.Unmap(),
		owner:   allocator.Owner{ContainerID: r.Spec.ContainerID, IfName: r.Spec.IfName},
		network: r.Annotations[ipamv1.NetworkAnnotation],
		netName: r.Spec.NetworkName,
		pod:     podOf(r.Spec.PodRef, r.Spec.PodUID),
		created: r.CreationTimestamp.Time,
	}
	if r.Spec.Owner != nil {
		e.persistent = r.Spec.Owner.Key()
		for _, u := range r.Spec.Users {
			e.users = append(e.users, allocator.Owner{ContainerID: u.ContainerID, IfName: u.IfName})
		}
	}
	return e, true
}

// put records r, replacing what the index held under its name. A reservation this store deleted is
// ignored, whatever event brings it back.
func (x *index) put(r *ipamv1.OverlappingRangeIPReservation) {
	e, ok := entryOf(r)
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, gone := x.deleted[e.uid]; gone {
		return
	}
	if old := x.byName[e.name]; old != nil {
		x.unlink(old)
	}
	x.byName[e.name] = e
	for _, o := range e.owners() {
		k := ownerKey{e.pool, o}
		if x.byOwner[k] == nil {
			x.byOwner[k] = map[string]*entry{}
		}
		x.byOwner[k][e.name] = e
	}
	x.byAddr[e.addr] = append(x.byAddr[e.addr], e)
	if e.persistent != "" {
		pk := persistentKey{e.pool, e.persistent}
		if cur := x.byPersistent[pk]; cur == nil || cur.ownerAddress().givesWayTo(e.ownerAddress()) {
			x.byPersistent[pk] = e
		}
	}
}

// ownerAddress is e's place among its owner's addresses in its pool, should the owner hold two.
func (e *entry) ownerAddress() ownerAddress {
	return ownerAddress{name: e.name, bound: len(e.users) > 0, created: e.created}
}

// remove forgets the reservation name if the index holds the object uid (an empty uid matches any).
// tombstone marks the uid as deleted by this store.
func (x *index) remove(name string, uid types.UID, tombstone bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if tombstone && uid != "" {
		x.deleted[uid] = x.now()
		x.expire()
	}
	if e := x.byName[name]; e != nil && (uid == "" || e.uid == uid) {
		x.unlink(e)
	}
}

// confirmDelete is the informer's delete event: the object is gone and its tombstone can go too.
func (x *index) confirmDelete(name string, uid types.UID) {
	x.mu.Lock()
	_, ours := x.deleted[uid]
	delete(x.deleted, uid)
	var gone *entry
	if e := x.byName[name]; !ours && e != nil && e.uid == uid {
		c := *e
		gone = &c
	}
	tell := x.deletedElsewhere
	x.mu.Unlock()
	x.remove(name, uid, false)
	if gone != nil && tell != nil {
		tell(*gone)
	}
}

func (x *index) unlink(e *entry) {
	delete(x.byName, e.name)
	for _, o := range e.owners() {
		k := ownerKey{e.pool, o}
		delete(x.byOwner[k], e.name)
		if len(x.byOwner[k]) == 0 {
			delete(x.byOwner, k)
		}
	}
	if pk := (persistentKey{e.pool, e.persistent}); e.persistent != "" && x.byPersistent[pk] == e {
		delete(x.byPersistent, pk)
	}
	x.byAddr[e.addr] = slices.DeleteFunc(x.byAddr[e.addr], func(o *entry) bool { return o == e })
	if len(x.byAddr[e.addr]) == 0 {
		delete(x.byAddr, e.addr)
	}
}

func (x *index) expire() {
	now := x.now()
	for uid, at := range x.deleted {
		if now.Sub(at) > tombstoneTTL {
			delete(x.deleted, uid)
		}
	}
}

// owned returns owner's reservations in pool, lowest address first.
func (x *index) owned(pool string, owner allocator.Owner) []entry {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []entry
	for _, e := range x.byOwner[ownerKey{pool, owner}] {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b entry) int { return a.addr.Compare(b.addr) })
	return out
}

// persistentIn returns this node's reservation of persistent owner key in pool.
func (x *index) persistentIn(pool, key string) (entry, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.byPersistent[persistentKey{pool, key}]; e != nil {
		return *e, true
	}
	return entry{}, false
}

// holds reports whether this node holds the reservation name at a.
func (x *index) holds(a netip.Addr, name string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range x.byAddr[a] {
		if e.name == name {
			return true
		}
	}
	return false
}

// heldIn reports whether this node holds a in a scope, whatever the reservation's name: in pool,
// or, when overlap is set, in any pool of network networkName. The name is the lock only for
// reservations named as this store names them; one named for another scope (a NAD that shares
// the pool with another enable_overlapping_ranges) still holds its address.
func (x *index) heldIn(a netip.Addr, pool string, overlap bool, networkName string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range x.byAddr[a] {
		if e.pool == pool || overlap && e.netName == networkName {
			return true
		}
	}
	return false
}

// lookup returns the entry named name.
func (x *index) lookup(name string) (entry, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.byName[name]; e != nil {
		return *e, true
	}
	return entry{}, false
}

// inPool returns this node's reservations of pool, in address order.
func (x *index) inPool(pool string) []entry {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []entry
	for _, e := range x.byName {
		if e.pool == pool {
			out = append(out, *e)
		}
	}
	slices.SortFunc(out, func(a, b entry) int { return a.addr.Compare(b.addr) })
	return out
}

// countByAddrBits is the largest block (in host bits) countIn walks address by address.
const countByAddrBits = 12

// countIn returns how many of this node's reservations of pool lie in block. A block of at most
// countByAddrBits host bits is counted address by address, so a release costs what its block
// holds, not what the node holds (a DEL took 3x longer at 100,000 reservations).
func (x *index) countIn(pool string, block netip.Prefix) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	if block.Addr().BitLen()-block.Bits() <= countByAddrBits {
		last := ipam.LastOf(block)
		for a := block.Masked().Addr(); a.IsValid() && a.Compare(last) <= 0; a = a.Next() {
			for _, e := range x.byAddr[a] {
				if e.pool == pool {
					n++
				}
			}
		}
		return n
	}
	for _, e := range x.byName {
		if e.pool == pool && block.Contains(e.addr) {
			n++
		}
	}
	return n
}

// handler keeps the index current from the informer of this node's reservations.
func (x *index) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if r, ok := obj.(*ipamv1.OverlappingRangeIPReservation); ok {
				x.put(r)
			}
		},
		UpdateFunc: func(_, obj any) {
			if r, ok := obj.(*ipamv1.OverlappingRangeIPReservation); ok {
				x.put(r)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if r, ok := obj.(*ipamv1.OverlappingRangeIPReservation); ok {
				x.confirmDelete(r.Name, r.UID)
			}
		},
	}
}
