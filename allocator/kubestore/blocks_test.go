package kubestore

import (
	"net/netip"
	"testing"
	"time"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/ipam"
)

// TestFirstFreeBlock checks the block search: from a start block to the window's end, then round
// from the window's start, skipping held blocks and blocks the exclusions empty.
func TestFirstFreeBlock(t *testing.T) {
	g, err := newGeometry(netip.MustParsePrefix("10.0.0.0/26"), 28) // blocks 0-3 of 16
	if err != nil {
		t.Fatal(err)
	}
	whole, err := ipam.ParseRange("range", ipam.RangeSpec{Range: "10.0.0.0/26"}, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	// Block 2 (10.0.0.32/28) is excluded whole; the window ends in block 3.
	holed, err := ipam.ParseRange("range", ipam.RangeSpec{Range: "10.0.0.0/26", RangeEnd: "10.0.0.50",
		Exclude: []string{"10.0.0.32/28"}}, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	set := func(is ...uint64) func(uint64) bool {
		m := map[uint64]bool{}
		for _, i := range is {
			m[i] = true
		}
		return func(i uint64) bool { return m[i] }
	}
	tests := []struct {
		name   string
		r      ipam.Range
		held   func(uint64) bool
		from   uint64
		want   uint64
		wantOK bool
	}{
		{"empty pool, from the start", whole, set(), 0, 0, true},
		{"from the middle", whole, set(), 2, 2, true},
		{"held blocks are skipped", whole, set(0, 1), 0, 2, true},
		{"wraps round to the start", whole, set(2, 3), 2, 0, true},
		{"wraps round past held blocks", whole, set(0, 2, 3), 3, 1, true},
		{"every block held", whole, set(0, 1, 2, 3), 1, 0, false},
		{"an excluded block is jumped", holed, set(0, 1), 0, 3, true},
		{"an excluded block is not chosen from it", holed, set(), 2, 3, true},
		{"an excluded block is not chosen wrapping", holed, set(0, 1, 3), 3, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := firstFreeBlock(g, tt.r, tt.held, tt.from)
			if ok != tt.wantOK || ok && got != tt.want {
				t.Errorf("firstFreeBlock = %d, %v, want %d, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestSearchStart checks where a node looks for its next block: the window's first block when it
// has none, after its highest block of the window, and wherever a hint puts it (inside the window).
func TestSearchStart(t *testing.T) {
	g, err := newGeometry(netip.MustParsePrefix("10.0.0.0/24"), 28) // blocks 0-15
	if err != nil {
		t.Fatal(err)
	}
	r, err := ipam.ParseRange("range", ipam.RangeSpec{Range: "10.0.0.0/24", RangeStart: "10.0.0.40", RangeEnd: "10.0.0.200"}, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	st := &poolState{geo: g}
	if got := st.searchStart(r, false); got != 2 {
		t.Errorf("no blocks, unused pool: start %d, want the window's first, 2", got)
	}
	starts := map[uint64]bool{}
	for range 200 {
		got := st.searchStart(r, true)
		if got < 2 || got > 12 {
			t.Fatalf("no blocks, pool in use: start %d, outside the window 2-12", got)
		}
		starts[got] = true
	}
	if len(starts) < 5 {
		t.Errorf("no blocks, pool in use: starts %v, want them spread over the window", starts)
	}
	st.addSlice(ownSlice{index: 5, prefix: g.block(5)})
	st.addSlice(ownSlice{index: 3, prefix: g.block(3)})
	st.addSlice(ownSlice{index: 14, prefix: g.block(14)}) // outside the window (ends in block 12)
	if got := st.searchStart(r, true); got != 6 {
		t.Errorf("blocks 3, 5, 14: start %d, want 6", got)
	}
	st.hints.claimed(12)
	if got := st.searchStart(r, true); got != 2 {
		t.Errorf("after the window's last block: start %d, want the window's first, 2", got)
	}
	for range 100 {
		st.hints.heldElsewhere(7, 2, 12)
		if got := st.searchStart(r, false); got < 2 || got > 12 {
			t.Fatalf("after a block held elsewhere: start %d, outside the window 2-12", got)
		}
	}
	if !st.hints.elsewhere[7] {
		t.Error("block 7 not remembered as held elsewhere")
	}
	now := time.Now()
	st.hints.learnList(map[uint64]bool{3: true, 4: true, 5: true}, map[uint64]bool{5: true}, now)
	if len(st.hints.elsewhere) != 2 || !st.hints.elsewhere[3] || !st.hints.elsewhere[4] || !st.hints.listFresh(now) {
		t.Errorf("after a list of blocks 3-5 (5 the node's own): %v, fresh %v", st.hints.elsewhere, st.hints.listFresh(now))
	}
	if st.hints.listFresh(now.Add(listTrusted)) {
		t.Error("a list is trusted beyond listTrusted")
	}
	st.hints.heldElsewhere(6, 2, 12)
	if !st.hints.listFresh(now) {
		t.Error("a block found held after a list made the list's knowledge stale")
	}
	big := map[uint64]bool{}
	for i := range uint64(maxKnownElsewhere + 1) {
		big[i] = true
	}
	st.hints.learnList(big, nil, now)
	if st.hints.elsewhere != nil || st.hints.listFresh(now) {
		t.Errorf("a list beyond the bound was kept: %d blocks, fresh %v", len(st.hints.elsewhere), st.hints.listFresh(now))
	}
}

// TestKnownElsewhereBounded checks that the memory of other nodes' blocks does not grow with the
// pool: past maxKnownElsewhere it starts again.
func TestKnownElsewhereBounded(t *testing.T) {
	var h blockHints
	for i := range uint64(3 * maxKnownElsewhere) {
		h.heldElsewhere(i, 0, 1<<40)
	}
	if n := len(h.elsewhere); n == 0 || n > maxKnownElsewhere {
		t.Errorf("%d blocks remembered, want 1 to %d", n, maxKnownElsewhere)
	}
}

func TestSliceIndexOf(t *testing.T) {
	long := "p-" + longName(300)
	tests := []struct {
		pool, name string
		want       uint64
		ok         bool
	}{
		{"blue-10.0.0.0-16", "blue-10.0.0.0-16.42", 42, true},
		{"blue-10.0.0.0-16", "blue-10.0.0.0-16.0", 0, true},
		{"blue-10.0.0.0-16", ipamv1.SliceName("blue-10.0.0.0-16", 1<<62), 1 << 62, true},
		{long, ipamv1.SliceName(long, 7), 7, true}, // shortened with a hash
		{"blue-10.0.0.0-16", "blue-10.0.0.0-16.x", 0, false},
		{"blue-10.0.0.0-16", "blue-10.0.0.0-16.042", 0, false}, // not how SliceName writes 42
		{"blue-10.0.0.0-16", "other.42", 0, false},
		{"blue-10.0.0.0-16", "nodot", 0, false},
	}
	for _, tt := range tests {
		got, ok := sliceIndexOf(tt.pool, tt.name)
		if ok != tt.ok || ok && got != tt.want {
			t.Errorf("sliceIndexOf(%q, %q) = %d, %v, want %d, %v", tt.pool, tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func longName(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return string(b)
}
