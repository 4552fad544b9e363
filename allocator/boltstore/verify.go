package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
	"golang.org/x/sys/unix"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/ipam"
)

// FindingKind names one kind of inconsistency that Verify reports, so a caller (netpoolctl check,
// a test) can tell them apart without parsing the text.
type FindingKind string

// The kinds of Finding.
const (
	// FindingBoltCheck: bbolt's own consistency check (tx.Check) failed: a page is unreachable,
	// freed twice, or out of order.
	FindingBoltCheck FindingKind = "BoltCheck"
	// FindingLayout: a bucket netpool writes is missing, or a value stands where a bucket belongs,
	// or a pool's key names no subnet.
	FindingLayout FindingKind = "Layout"
	// FindingCorruptRecord: an allocation's key is not an address or its record does not decode.
	FindingCorruptRecord FindingKind = "CorruptRecord"
	// FindingOutsideSubnet: an allocation's address lies outside the subnet its pool key names.
	FindingOutsideSubnet FindingKind = "OutsideSubnet"
	// FindingOwnerIndexMissing: an allocation has no owners entry pointing at it, so DEL of its
	// attachment would not find it.
	FindingOwnerIndexMissing FindingKind = "OwnerIndexMissing"
	// FindingOwnerIndexDangling: an owners entry points at no allocation, or at another
	// attachment's.
	FindingOwnerIndexDangling FindingKind = "OwnerIndexDangling"
	// FindingRunMalformed: a used run whose ends are not addresses of one family, or whose end is
	// before its start.
	FindingRunMalformed FindingKind = "RunMalformed"
	// FindingRunsNotMaximal: two used runs overlap or touch; the store keeps them merged.
	FindingRunsNotMaximal FindingKind = "RunsNotMaximal"
	// FindingRunHoldsFree: a used run covers an address that no allocation holds, so the free
	// search skips an address it could hand out.
	FindingRunHoldsFree FindingKind = "RunHoldsFree"
	// FindingAllocationNotInRun: an allocated address is in no used run, so the free search could
	// hand it out a second time.
	FindingAllocationNotInRun FindingKind = "AllocationNotInRun"
	// FindingScopeMismatch: an allocation records an overlap scope other than its pool's network's.
	FindingScopeMismatch FindingKind = "ScopeMismatch"
	// FindingDuplicateInScope: two pools of one overlap scope hold the same address.
	FindingDuplicateInScope FindingKind = "DuplicateInScope"
	// FindingCoolingIndex: the reuse cool-down's two indexes disagree, or an address is held and
	// cooling at once.
	FindingCoolingIndex FindingKind = "CoolingIndex"
	// FindingPersistentIndex: a persistent entry (sticky pod names, persistent.go) points at no
	// allocation or at one recording another owner, or a persistently owned allocation has no
	// entry pointing at it, so its pod name would not get it back.
	FindingPersistentIndex FindingKind = "PersistentIndex"
)

// Finding is one inconsistency: its kind, the bucket it concerns ("pool/<pool key>" or
// "scope/<overlap scope>"; empty for the whole file) and a sentence naming the keys and
// addresses involved.
type Finding struct {
	Kind   FindingKind
	Object string
	Text   string
}

func (f Finding) String() string { return fmt.Sprintf("%s: %s", f.Kind, f.Text) }

// Verification is what Verify read and found.
type Verification struct {
	// Pools and Allocations count what the file holds.
	Pools, Allocations int
	// Findings are the inconsistencies, in the order found; none for a consistent file.
	Findings []Finding
}

// maxFindingsPerKind bounds the findings of one kind in one pool or scope: a damaged bucket of a
// million allocations reports the first few and a count, not a million lines.
const maxFindingsPerKind = 10

// Verify checks the store file at path without changing it: that its page graph is sound
// (checkPageGraph, always walked here), that bbolt's own check passes and that netpool's indexes
// (the owners index, each pool's used runs, each overlap scope's runs) agree with the allocation
// records, every record decodes and every address lies in its pool's subnet. It never creates the
// file: a missing, empty or corrupt file is an error wrapping allocator.ErrStoreUnusable, and a
// file that a writer holds longer than timeout is allocator.ErrStoreBusy. It reads the file in one
// read-only transaction, so it sees one state.
//
// The end of ctx stops the wait for a writer and the walk of netpool's buckets, between two
// entries, and Verify returns ctx's error. bbolt's own check, which the page graph walk bounds to
// one visit of each page, runs to its end once started.
//
// Memory grows with the number of allocations (their addresses are held to compare the indexes),
// never with the size of a range.
func Verify(ctx context.Context, path string, timeout time.Duration) (Verification, error) {
	db, err := openBoltReadOnly(ctx, path, timeout)
	if err != nil {
		return Verification{}, err
	}
	var v Verification
	err = contain("verify", path, func() error {
		return db.View(func(tx *bolt.Tx) error {
			var err error
			if v, err = verifyTx(ctx, tx); err != nil {
				return err
			}
			// bbolt's check walks the file on a goroutine of its own, where a fault cannot be
			// contained; the page graph walk before the open and the walk above have read every
			// page it will read, so a page that would fault has already been reported as an error.
			for cerr := range tx.Check() {
				v.Findings = append(v.Findings, Finding{Kind: FindingBoltCheck, Text: cerr.Error()})
			}
			return nil
		})
	})
	if cerr := contain("close", path, db.Close); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return Verification{}, classify(err)
	}
	return v, nil
}

// openBoltReadOnly opens path with bbolt read-only: it refuses what OpenExisting refuses (a
// symbolic link, a file that is not regular, a file validateFile rejects) and, unlike Open, a
// missing or empty file, which it never creates. A shared flock on the file keeps writers (whose
// bbolt takes it exclusively) out from before the page graph walk until bbolt holds its own.
func openBoltReadOnly(ctx context.Context, path string, timeout time.Duration) (*bolt.DB, error) {
	deadline := time.Now().Add(timeout)
	if _, err := statExisting(path); err != nil {
		return nil, err
	}
	f, err := openNoFollow(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: failed to open %s: %w", allocator.ErrStoreUnusable, path, err)
	}
	defer f.Close() // read only; closing drops the shared lock, which bbolt's own then replaces
	if err := waitFlock(ctx, f, unix.LOCK_SH, deadline); err != nil {
		if errors.Is(err, allocator.ErrStoreBusy) {
			return nil, fmt.Errorf("%w: %s is locked by a writer", allocator.ErrStoreBusy, path)
		}
		return nil, err
	}
	checked, err := checkFile(f, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var db *bolt.DB
	err = contain("open", path, func() error {
		var file *os.File
		openFile := func(name string, flag int, perm os.FileMode) (*os.File, error) {
			var err error
			file, err = openNoFollow(name, flag, perm)
			return file, err
		}
		var err error
		db, err = bolt.Open(path, 0, &bolt.Options{ReadOnly: true, Timeout: max(time.Until(deadline), time.Millisecond), OpenFile: openFile})
		if err != nil {
			return err
		}
		if err := sameFile(file, checked); err != nil {
			_ = db.Close() // bbolt has read only the meta page of a file that was not checked
			return err
		}
		return nil
	})
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, fmt.Errorf("%w: %s is locked by a writer: %w", allocator.ErrStoreBusy, path, err)
	case errors.Is(err, allocator.ErrStoreUnusable):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: failed to open %s: %w", allocator.ErrStoreUnusable, path, err)
	}
	return db, nil
}

// verifier collects the findings of one transaction.
type verifier struct {
	ctx    context.Context
	v      Verification
	counts map[string]int // kind and object -> findings so far, for maxFindingsPerKind
	owners *bolt.Bucket
	// scopes holds, per overlap scope, the addresses its allocations hold, with their pools.
	scopes map[string][]scoped
}

type scoped struct {
	addr netip.Addr
	pool string
}

func (w *verifier) add(kind FindingKind, object, format string, args ...any) {
	k := string(kind) + "\x00" + object
	w.counts[k]++
	if w.counts[k] <= maxFindingsPerKind {
		w.v.Findings = append(w.v.Findings, Finding{Kind: kind, Object: object, Text: fmt.Sprintf(format, args...)})
	}
}

// summarise appends, for each kind and pool that hit maxFindingsPerKind, how many were left out.
func (w *verifier) summarise() {
	var over []Finding
	for k, n := range w.counts {
		if n > maxFindingsPerKind {
			kind, object, _ := strings.Cut(k, "\x00")
			over = append(over, Finding{Kind: FindingKind(kind), Object: object,
				Text: fmt.Sprintf("%d more findings of kind %s in %s are not listed", n-maxFindingsPerKind, kind, object)})
		}
	}
	slices.SortFunc(over, func(a, b Finding) int { return strings.Compare(a.Text, b.Text) })
	w.v.Findings = append(w.v.Findings, over...)
}

// cancelled reports whether the walk must stop: the caller's context has ended. The bbolt walks
// it stops return ctx's error, which verifyTx returns.
func (w *verifier) cancelled() error { return w.ctx.Err() }

func verifyTx(ctx context.Context, tx *bolt.Tx) (Verification, error) {
	w := &verifier{ctx: ctx, counts: map[string]int{}, scopes: map[string][]scoped{}}
	top := map[string]*bolt.Bucket{}
	for _, name := range [][]byte{bucketPools, bucketScopes, bucketOwners} {
		if top[string(name)] = tx.Bucket(name); top[string(name)] == nil {
			w.add(FindingLayout, "", "the top-level bucket %q is missing", name)
		}
	}
	w.owners = top[string(bucketOwners)]
	if pools := top[string(bucketPools)]; pools != nil {
		_ = pools.ForEach(func(k, v []byte) error {
			if err := w.cancelled(); err != nil {
				return err
			}
			if v != nil {
				w.add(FindingLayout, "pool/"+string(k), "bucket %q holds a value under %q where a pool's bucket belongs", bucketPools, k)
				return nil
			}
			w.v.Pools++
			w.verifyPool(string(k), pools.Bucket(k))
			return nil
		})
	}
	if scopes := top[string(bucketScopes)]; scopes != nil {
		_ = scopes.ForEach(func(k, v []byte) error {
			if err := w.cancelled(); err != nil {
				return err
			}
			if v != nil {
				w.add(FindingLayout, "scope/"+string(k), "bucket %q holds a value under %q where a scope's runs belong", bucketScopes, k)
				return nil
			}
			w.verifyScope(string(k), scopes.Bucket(k))
			return nil
		})
	}
	for _, name := range sortedKeys(w.scopes) {
		if scopes := top[string(bucketScopes)]; scopes != nil && scopes.Bucket([]byte(name)) == nil {
			w.add(FindingAllocationNotInRun, "scope/"+name, "%d allocations record overlap scope %q, which has no runs bucket, so other pools of the scope may hand their addresses out again",
				len(w.scopes[name]), name)
		}
	}
	if w.owners != nil {
		w.verifyOwners(top[string(bucketPools)])
	}
	if err := w.cancelled(); err != nil {
		return Verification{}, err
	}
	w.summarise()
	return w.v, nil
}

// poolSubnet is the subnet a pool key (ipam.PoolKey: "[network/]subnet") names, and its network.
func poolSubnet(poolKey string) (string, netip.Prefix, bool) {
	i := strings.LastIndexByte(poolKey, '/')
	if i < 0 {
		return "", netip.Prefix{}, false
	}
	network, subnet := "", poolKey
	if j := strings.LastIndexByte(poolKey[:i], '/'); j >= 0 {
		network, subnet = poolKey[:j], poolKey[j+1:]
	}
	p, err := netip.ParsePrefix(subnet)
	if err != nil || ipam.PoolKey(network, p) != poolKey {
		return "", netip.Prefix{}, false
	}
	return network, p, true
}

func (w *verifier) verifyPool(pool string, b *bolt.Bucket) {
	network, subnet, keyOK := poolSubnet(pool)
	if !keyOK {
		w.add(FindingLayout, "pool/"+pool, "pool key %q names no subnet (want [network/]subnet)", pool)
	}
	alloc, used := b.Bucket(bucketAlloc), b.Bucket(bucketUsed)
	if alloc == nil || used == nil || b.Bucket(bucketMeta) == nil {
		w.add(FindingLayout, "pool/"+pool, "pool %s lacks one of its buckets alloc, used and meta", pool)
	}
	if alloc == nil {
		return
	}
	var held []netip.Addr
	_ = alloc.ForEach(func(k, v []byte) error {
		if err := w.cancelled(); err != nil {
			return err
		}
		a, ok := ipam.AddrFromKey(k)
		if !ok || v == nil {
			w.add(FindingCorruptRecord, "pool/"+pool, "pool %s: alloc key %x is not a 16-byte address with a record", pool, k)
			return nil
		}
		w.v.Allocations++
		held = append(held, a)
		al, err := decodeRecord(pool, k, v)
		if err != nil {
			w.add(FindingCorruptRecord, "pool/"+pool, "pool %s: the record of %s does not decode: %v", pool, a, err)
			return nil
		}
		if al.Owner.ContainerID == "" || al.Owner.IfName == "" {
			w.add(FindingCorruptRecord, "pool/"+pool, "pool %s: the record of %s names no attachment (container %q, interface %q)",
				pool, a, al.Owner.ContainerID, al.Owner.IfName)
		}
		if keyOK && !subnet.Contains(a) {
			w.add(FindingOutsideSubnet, "pool/"+pool, "pool %s holds %s, outside its subnet %s", pool, a, subnet)
		}
		if w.owners != nil {
			switch got := w.owners.Get(ownerKey(pool, al.Owner)); {
			case got == nil:
				w.add(FindingOwnerIndexMissing, "pool/"+pool, "pool %s: %s is held by %s/%s, which the owners index does not list",
					pool, a, al.Owner.ContainerID, al.Owner.IfName)
			case !bytes.Equal(got, k):
				w.add(FindingOwnerIndexMissing, "pool/"+pool, "pool %s: %s is held by %s/%s, but the owners index points that attachment at %s",
					pool, a, al.Owner.ContainerID, al.Owner.IfName, addr(got))
			}
		}
		if al.Scope != "" {
			if keyOK && al.Scope != allocator.OverlapScope(network) {
				w.add(FindingScopeMismatch, "pool/"+pool, "pool %s: %s records overlap scope %q; the pool's network has scope %q",
					pool, a, al.Scope, allocator.OverlapScope(network))
			}
			w.scopes[al.Scope] = append(w.scopes[al.Scope], scoped{addr: a, pool: pool})
		}
		return nil
	})
	if used != nil {
		w.verifyRuns(used, held, "pool/"+pool, "pool "+pool)
	}
	if b.Bucket(bucketBlocked) != nil || b.Bucket(bucketCooling) != nil || b.Bucket(bucketCooled) != nil {
		w.verifyCooling(pool, b, held)
	}
	w.verifyPersistent(pool, b, alloc)
}

// verifyPersistent checks a pool's persistent entries against its allocations, both ways.
func (w *verifier) verifyPersistent(pool string, b, alloc *bolt.Bucket) {
	pe := b.Bucket(bucketPersistent)
	if pe != nil {
		_ = pe.ForEach(func(k, v []byte) error {
			if err := w.cancelled(); err != nil {
				return err
			}
			a, ok := ipam.AddrFromKey(v)
			if !ok {
				w.add(FindingPersistentIndex, "pool/"+pool, "pool %s: persistent entry %q -> %x is not an address", pool, k, v)
				return nil
			}
			rec := alloc.Get(v)
			if rec == nil {
				w.add(FindingPersistentIndex, "pool/"+pool, "pool %s: persistent owner %s points at %s, which the pool does not hold", pool, k, a)
				return nil
			}
			if al, err := decodeRecord(pool, v, rec); err == nil && al.Persistent != string(k) {
				w.add(FindingPersistentIndex, "pool/"+pool, "pool %s: persistent owner %s points at %s, which records owner %q", pool, k, a, al.Persistent)
			}
			return nil
		})
	}
	_ = alloc.ForEach(func(k, v []byte) error {
		if err := w.cancelled(); err != nil {
			return err
		}
		al, err := decodeRecord(pool, k, v)
		if err != nil || al.Persistent == "" {
			return nil // a corrupt record is reported by verifyPool
		}
		if pe == nil || !bytes.Equal(pe.Get([]byte(al.Persistent)), k) {
			w.add(FindingPersistentIndex, "pool/"+pool, "pool %s: %s records persistent owner %s, whose entry does not point at it", pool, al.Addr, al.Persistent)
		}
		return nil
	})
}

// verifyCooling checks a pool's reuse cool-down buckets (cooling.go): both indexes of the
// cooling addresses name the same addresses at the same times, no cooling address is held, and
// the blocked runs are exactly the held and the cooling addresses, since they are what the free
// search skips.
func (w *verifier) verifyCooling(pool string, b *bolt.Bucket, held []netip.Addr) {
	object := "pool/" + pool
	blocked, byTime, byAddr := b.Bucket(bucketBlocked), b.Bucket(bucketCooling), b.Bucket(bucketCooled)
	if blocked == nil || byTime == nil || byAddr == nil {
		w.add(FindingLayout, object, "pool %s has some but not all of its cool-down buckets blocked, cooling and cooled", pool)
		return
	}
	var coolingAddrs []netip.Addr
	_ = byTime.ForEach(func(k, _ []byte) error {
		if err := w.cancelled(); err != nil {
			return err
		}
		a, ok := ipam.AddrFromKey(k[min(8, len(k)):])
		if len(k) != 8+16 || !ok {
			w.add(FindingCorruptRecord, object, "pool %s: cooling entry %x is not a release time and an address", pool, k)
			return nil
		}
		if got := byAddr.Get(k[8:]); !bytes.Equal(got, k[:8]) {
			w.add(FindingCoolingIndex, object, "pool %s: %s cools since %s by one index and %x by the other", pool, a, unstamp(k[:8]).UTC(), got)
		}
		if _, found := slices.BinarySearchFunc(held, a, compareAddr); found {
			w.add(FindingCoolingIndex, object, "pool %s: %s is held and cooling at once", pool, a)
		}
		coolingAddrs = append(coolingAddrs, a)
		return nil
	})
	_ = byAddr.ForEach(func(k, v []byte) error {
		if err := w.cancelled(); err != nil {
			return err
		}
		if len(v) != 8 || byTime.Get(append(append([]byte(nil), v...), k...)) == nil {
			w.add(FindingCoolingIndex, object, "pool %s: %x cools by the address index only", pool, k)
		}
		return nil
	})
	skipped := append(slices.Clone(held), coolingAddrs...)
	slices.SortFunc(skipped, compareAddr)
	skipped = slices.Compact(skipped)
	w.verifyRuns(blocked, skipped, object, "pool "+pool+" (blocked runs)")
}

func (w *verifier) verifyScope(scope string, b *bolt.Bucket) {
	members := w.scopes[scope]
	slices.SortFunc(members, func(x, y scoped) int {
		if c := compareAddr(x.addr, y.addr); c != 0 {
			return c
		}
		return strings.Compare(x.pool, y.pool)
	})
	var held []netip.Addr
	for i, m := range members {
		if i > 0 && members[i-1].addr == m.addr {
			w.add(FindingDuplicateInScope, "scope/"+scope, "overlap scope %q: %s is held in pool %s and in pool %s", scope, m.addr, members[i-1].pool, m.pool)
			continue
		}
		held = append(held, m.addr)
	}
	w.verifyRuns(b, held, "scope/"+scope, fmt.Sprintf("overlap scope %q", scope))
}

// verifyRuns checks that the runs in b are well formed, maximal and non-overlapping, cover only
// addresses of held (sorted, without duplicates) and cover all of them. It walks each run's
// addresses only as far as held has them, so a damaged run over a /64 costs one step.
func (w *verifier) verifyRuns(b *bolt.Bucket, held []netip.Addr, object, what string) {
	var prev netip.Addr
	c := b.Cursor()
	for k, v := c.First(); k != nil && w.cancelled() == nil; k, v = c.Next() {
		first, ok1 := ipam.AddrFromKey(k)
		last, ok2 := ipam.AddrFromKey(v)
		if v == nil || !ok1 || !ok2 || first.BitLen() != last.BitLen() || compareAddr(last, first) < 0 {
			w.add(FindingRunMalformed, object, "%s: used run %x -> %x is not a run of addresses (first <= last, one family)", what, k, v)
			continue
		}
		if prev.IsValid() && prev.BitLen() == first.BitLen() {
			if compareAddr(prev, first) >= 0 {
				w.add(FindingRunsNotMaximal, object, "%s: used run %s-%s overlaps the run before it, which ends at %s", what, first, last, prev)
			} else if prev.Next() == first {
				w.add(FindingRunsNotMaximal, object, "%s: used runs ending at %s and starting at %s touch; they should be one run", what, prev, first)
			}
		}
		prev = last
		i, _ := slices.BinarySearchFunc(held, first, compareAddr)
		expect := first
		for ; i < len(held) && held[i] == expect && expect != last; i++ {
			expect = expect.Next()
		}
		if i >= len(held) || held[i] != expect {
			w.add(FindingRunHoldsFree, object, "%s: used run %s-%s covers %s, which no allocation holds", what, first, last, expect)
		}
	}
	r := runs{b}
	for _, a := range held {
		if _, _, ok := r.containing(a); !ok {
			w.add(FindingAllocationNotInRun, object, "%s: %s is allocated but in no used run, so it could be handed out again", what, a)
		}
	}
}

func (w *verifier) verifyOwners(pools *bolt.Bucket) {
	_ = w.owners.ForEach(func(k, v []byte) error {
		if err := w.cancelled(); err != nil {
			return err
		}
		parts := strings.SplitN(string(k), "\x00", 3)
		a, ok := ipam.AddrFromKey(v)
		if len(parts) != 3 || !ok {
			w.add(FindingOwnerIndexDangling, "", "owners entry %q -> %x is not pool\\0containerID\\0ifName -> address", k, v)
			return nil
		}
		pool, o := parts[0], allocator.Owner{ContainerID: parts[1], IfName: parts[2]}
		var rec []byte
		if pools != nil {
			if pb := pools.Bucket([]byte(pool)); pb != nil {
				if alloc := pb.Bucket(bucketAlloc); alloc != nil {
					rec = alloc.Get(v)
				}
			}
		}
		if rec == nil {
			w.add(FindingOwnerIndexDangling, "pool/"+pool, "owners index: %s/%s points at %s, which pool %s does not hold", o.ContainerID, o.IfName, a, pool)
			return nil
		}
		if al, err := decodeRecord(pool, v, rec); err == nil && al.Owner != o {
			w.add(FindingOwnerIndexDangling, "pool/"+pool, "owners index: %s/%s points at %s, which pool %s records as held by %s/%s",
				o.ContainerID, o.IfName, a, pool, al.Owner.ContainerID, al.Owner.IfName)
		}
		return nil
	})
}

// compareAddr orders addresses as their keys order in a bucket.
func compareAddr(a, b netip.Addr) int {
	ka, kb := key(a), key(b)
	return bytes.Compare(ka, kb)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
