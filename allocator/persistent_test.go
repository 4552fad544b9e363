package allocator_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/ipam"
)

// persistentStore is memStore with persistent owners: owners maps an attachment to its owner, as
// a store resolves it (an IPAMClaim); a rebound address gets the new attachment as its holder, an
// unbound one keeps its owner and no attachment.
type persistentStore struct {
	*memStore
	owners map[allocator.Owner]string
}

func (s *persistentStore) Update(ctx context.Context, fn func(context.Context, allocator.Txn) error) error {
	return s.memStore.Update(ctx, func(ctx context.Context, tx allocator.Txn) error {
		return fn(ctx, &persistentTxn{memTxn: tx.(*memTxn), owners: s.owners})
	})
}

func (s *persistentStore) View(ctx context.Context, fn func(context.Context, allocator.Txn) error) error {
	return s.memStore.View(ctx, func(ctx context.Context, tx allocator.Txn) error {
		return fn(ctx, &persistentTxn{memTxn: tx.(*memTxn), owners: s.owners})
	})
}

type persistentTxn struct {
	*memTxn
	owners map[allocator.Owner]string
}

var _ allocator.PersistentTxn = (*persistentTxn)(nil)

var errBadOwner = errors.New("bad owner")

func (t *persistentTxn) PersistentOwner(_ context.Context, _ *ipam.Config, o allocator.Owner) (string, error) {
	if t.owners[o] == "bad" {
		return "", errBadOwner
	}
	return t.owners[o], nil
}

func (t *persistentTxn) Rebind(_ context.Context, p allocator.Pool, a *allocator.Allocation) (bool, error) {
	for addr, al := range t.st.pools[p.Key] {
		if al.Persistent == a.Persistent {
			a.Addr = addr
			t.st.pools[p.Key][addr] = *a
			return true, nil
		}
	}
	return false, nil
}

func (t *persistentTxn) Unbind(_ context.Context, pool string, o allocator.Owner) (allocator.Allocation, bool, error) {
	for addr, al := range t.st.pools[pool] {
		if al.Owner == o && al.Persistent != "" {
			al.Owner = allocator.Owner{}
			t.st.pools[pool][addr] = al
			return al, true, nil
		}
	}
	return allocator.Allocation{}, false, nil
}

// TestPersistentOwner holds the engine to its rule: an owner's address is re-bound, DEL and GC
// unbind and never release it, and an attachment without an owner is untouched by the rule.
func TestPersistentOwner(t *testing.T) {
	c := load(t, `"range":"10.9.0.0/29"`, "")
	st := &persistentStore{memStore: newMemStore(), owners: map[allocator.Owner]string{
		own("vm-1"): "IPAMClaim/vms/a", own("vm-2"): "IPAMClaim/vms/a", own("broken"): "bad",
	}}
	a := allocator.New(st)
	held := func() map[netip.Addr]allocator.Allocation {
		return st.state.pools[c.PoolKey(0)]
	}

	first, err := a.Add(ctx, c, own("vm-1"))
	if err != nil {
		t.Fatal(err)
	}
	x := first[0].Addr
	if first[0].Persistent != "IPAMClaim/vms/a" {
		t.Fatalf("first ADD recorded owner %q", first[0].Persistent)
	}
	released, err := a.Del(ctx, c, own("vm-1"))
	if err != nil || len(released) != 0 {
		t.Fatalf("DEL of a claimed attachment released %v (%v), want nothing", released, err)
	}
	if al, ok := held()[x]; !ok || al.Persistent == "" || al.Owner != (allocator.Owner{}) {
		t.Fatalf("after DEL %s is %+v (held %v), want held by its owner with no attachment", x, al, ok)
	}

	second, err := a.Add(ctx, c, own("vm-2"))
	if err != nil || second[0].Addr != x {
		t.Fatalf("ADD of the restarted VM got %v (%v), want %s", second, err, x)
	}
	released, err = a.GC(ctx, c, nil)
	if err != nil || len(released) != 0 {
		t.Fatalf("GC with nothing valid released %v (%v), want nothing", released, err)
	}
	if _, ok := held()[x]; !ok {
		t.Fatalf("GC released the claimed %s", x)
	}

	plain, err := a.Add(ctx, c, own("pod"))
	if err != nil || plain[0].Addr == x || plain[0].Persistent != "" {
		t.Fatalf("ADD without an owner got %+v (%v), want another address of its own", plain, err)
	}
	if released, err := a.Del(ctx, c, own("pod")); err != nil || len(released) != 1 {
		t.Fatalf("DEL without an owner released %v (%v), want its address", released, err)
	}
	if _, err := a.Add(ctx, c, own("broken")); !errors.Is(err, errBadOwner) {
		t.Fatalf("ADD whose owner cannot be used: %v, want the store's error", err)
	}
	if len(held()) != 1 {
		t.Fatalf("held %v, want only the claimed %s", held(), x)
	}
}
