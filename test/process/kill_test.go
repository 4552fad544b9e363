package process

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/test/harness"
)

// maxKillWaves bounds the kill waves of TestKilledAddsLeaveAConsistentReclaimableStore; the range
// holds all of them even if every dead racer's address is left for GC.
const maxKillWaves = 8

func TestKilledAddsLeaveAConsistentReclaimableStore(t *testing.T) {
	ctx := testContext(t)
	f := newFixture(t, map[string]any{"range": "10.40.0.0/22", "lock_timeout": "60s"})

	// valid are the attachments the runtime knows: every ADD that printed a result. forgotten are
	// attachments whose containers are gone, so that GC has work to do even when no racer dies
	// between its commit and its output.
	valid, forgotten := map[string]netip.Addr{}, map[string]netip.Addr{}
	warm, err := f.exec(ctx, "ADD", "warm")
	if err != nil {
		t.Fatalf("first ADD: %v", err)
	}
	valid["warm"] = mustOne(t, warm)
	for i := range 4 {
		forgotten[containerID("gone", i)] = f.mustAdd(ctx, containerID("gone", i))
	}

	// A first wave that nobody kills shows how long killRacers concurrent ADDs take here.
	calm := make([]*racer, killRacers)
	for i := range calm {
		calm[i] = &racer{id: containerID("calm", i)}
	}
	start := time.Now()
	for i, err := range parallel(killRacers, func(i int) error { return runRacer(ctx, f, calm[i], nil) }) {
		if err != nil {
			t.Fatalf("ADD %s: %v", calm[i].id, err)
		}
		valid[calm[i].id] = calm[i].addr
	}

	// Kill waves until one cuts a call inside the store's lock. How many calls the sniper catches
	// there depends on scheduling (a call holds the lock only briefly: 64 pass it in about
	// 200 ms here); on a loaded machine a wave may catch none, so the test tries again rather than
	// pass untested.
	window := time.Since(start)
	var died, cutInLock, cutAfterCommit, cutTimed int
	for wave := 0; wave < maxKillWaves && cutInLock == 0; wave++ {
		racers := newRacers(t, fmt.Sprintf("racer%d", wave), window)
		errs := runKillWave(ctx, t, f, racers)
		for i, r := range racers {
			switch {
			case errs[i] != nil:
				t.Errorf("ADD %s (not killed): %v", r.id, errs[i])
			case r.exited:
				valid[r.id] = r.addr
			default:
				died++
			}
			switch {
			case r.cutInLock:
				cutInLock++
			case r.signalled && r.mode == killInLock:
				cutAfterCommit++
			case r.signalled:
				cutTimed++
			}
		}
	}

	// The file is consistent, every owner holds one address, and every ADD that printed a result
	// holds what it printed, uniquely.
	all := maps.Clone(valid)
	maps.Copy(all, forgotten)
	assertUniqueInWindow(t, all, netip.MustParseAddr("10.40.0.1"), netip.MustParseAddr("10.40.3.254"))
	held := f.held(ctx)
	assertHolds(t, held, all)
	t.Logf("%d racers died: %d frozen and killed while holding the store's lock, %d killed after releasing it but before they exited, %d at a random moment; %d allocations of dead racers left for GC",
		died, cutInLock, cutAfterCommit, cutTimed, len(held)-len(all))
	// A racer frozen while it held the lock, then killed, was cut inside its transaction: the
	// case the test is named for.
	if cutInLock == 0 {
		t.Errorf("in %d waves no racer was killed while it held the store's lock (%d after releasing it, %d at a random moment): no call was cut mid-flight, the run tested nothing",
			maxKillWaves, cutAfterCommit, cutTimed)
	}

	// The lock is not stuck: a new ADD gets through at once.
	probe, err := f.exec(ctx, "ADD", "probe")
	if err != nil {
		t.Fatalf("ADD after the kills: %v", err)
	}
	if probe.Elapsed > 2*time.Second {
		t.Errorf("ADD after the kills took %v, want under 2s", probe.Elapsed)
	}
	valid["probe"] = mustOne(t, probe)

	gcConf, err := harness.GCNetConf(network, f.ipam, attachments(valid))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := harness.Exec(ctx, f.plugin, harness.Invocation{Command: "GC", Config: gcConf}); err != nil {
		t.Fatalf("GC: %v", err)
	}
	held = f.held(ctx)
	assertHolds(t, held, valid)
	if len(held) != len(valid) {
		t.Errorf("store holds %d allocations after GC, want only the %d valid attachments", len(held), len(valid))
	}
}

// runKillWave runs racers at once, with a sniper killing the killInLock ones while they hold the
// store's lock, and returns each racer's error.
func runKillWave(ctx context.Context, t *testing.T, f *fixture, racers []*racer) []error {
	t.Helper()
	ino, err := inode(f.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	var targets running
	stop := make(chan struct{})
	var snipeErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		snipeErr = snipe(ino, &targets, 300*time.Microsecond, stop)
	}()
	errs := parallel(len(racers), func(i int) error { return runRacer(ctx, f, racers[i], &targets) })
	close(stop)
	<-done
	if snipeErr != nil {
		t.Fatalf("failed to watch the store's lock: %v", snipeErr)
	}
	return errs
}

// attachments lists the owners of want for GC's valid attachments.
func attachments(want map[string]netip.Addr) []types.GCAttachment {
	out := make([]types.GCAttachment, 0, len(want))
	for id := range want {
		out = append(out, types.GCAttachment{ContainerID: id, IfName: "eth0"})
	}
	return out
}

// assertHolds asserts that no owner holds two addresses and that each container of want holds
// exactly its address there.
func assertHolds(t *testing.T, held []allocator.Allocation, want map[string]netip.Addr) {
	t.Helper()
	byOwner := map[string]netip.Addr{}
	for _, al := range held {
		if prev, dup := byOwner[al.Owner.ContainerID]; dup {
			t.Errorf("%s holds both %s and %s", al.Owner.ContainerID, prev, al.Addr)
		}
		byOwner[al.Owner.ContainerID] = al.Addr
	}
	for id, a := range want {
		if got, ok := byOwner[id]; !ok || got != a {
			t.Errorf("%s printed %s, the store gives it %v", id, a, got)
		}
	}
}

// mustOne returns the one address of an ADD outcome.
func mustOne(t *testing.T, out harness.Outcome) netip.Addr {
	t.Helper()
	addrs, err := out.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 1 {
		t.Fatalf("ADD returned %v, want one address", addrs)
	}
	return addrs[0]
}
