package kubestore

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/internal/ippool"
	"github.com/netpool/netpool/ipam"
)

func TestErrorClasses(t *testing.T) {
	gr := schema.GroupResource{Group: "ipam.netpool.io", Resource: "overlappingrangeipreservations"}
	tests := []struct {
		name                string
		err                 error
		transient, mayApply bool
	}{
		{"connection refused", errors.New("dial tcp: connect: connection refused"), true, true},
		{"already exists", apierrors.NewAlreadyExists(gr, "x"), false, false},
		{"object not found", apierrors.NewNotFound(gr, "x"), false, false},
		{"kind not served yet", apierrors.NewGenericServerResponse(http.StatusNotFound, "post", gr, "", "", 0, false), true, false},
		{"forbidden", apierrors.NewForbidden(gr, "x", errors.New("rbac")), false, false},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "K"}, "x", nil), false, false},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), true, false},
		{"server timeout", apierrors.NewServerTimeout(gr, "create", 1), true, true},
		{"timeout", apierrors.NewTimeoutError("etcd", 1), true, true},
		{"internal error", apierrors.NewInternalError(errors.New("etcd")), true, true},
		{"unavailable", apierrors.NewServiceUnavailable("starting"), true, true},
		{"wrapped", fmt.Errorf("create: %w", apierrors.NewServiceUnavailable("starting")), true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := transient(tt.err); got != tt.transient {
				t.Errorf("transient = %v", got)
			}
			if got := maybeApplied(tt.err); got != tt.mayApply {
				t.Errorf("maybeApplied = %v", got)
			}
		})
	}
	if err := permanent("create x", apierrors.NewInvalid(schema.GroupKind{Kind: "K"}, "x", nil)); !errors.Is(err, ipam.ErrInvalidConfig) {
		t.Errorf("permanent(invalid) = %v", err)
	}
	if err := permanent("create x", apierrors.NewForbidden(gr, "x", errors.New("rbac"))); !errors.Is(err, allocator.ErrStoreUnusable) ||
		!strings.Contains(err.Error(), "failed to create x") {
		t.Errorf("permanent(forbidden) = %v", err)
	}
	busy := fmt.Errorf("%w: x", allocator.ErrStoreBusy)
	if apiFailure("y", busy) != busy {
		t.Error("apiFailure rewrapped a busy error")
	}
}

func TestInlinePool(t *testing.T) {
	r, err := ipam.ParseRange("range", ipam.RangeSpec{Range: "10.0.0.0/24", RangeStart: "10.0.0.10", Exclude: []string{"10.0.0.20/30", "10.0.0.99"}},
		netip.MustParseAddr("10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := ippool.Derive("blue", r, ippool.Rules{Overlapping: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "blue-10.0.0.0-24" || p.Spec.Range != "10.0.0.0/24" || p.Spec.RangeStart != "10.0.0.10" || p.Spec.RangeEnd != "" || p.Spec.NetworkName != "blue" ||
		p.Spec.Gateway != "10.0.0.1" || strings.Join(p.Spec.Exclude, " ") != "10.0.0.20/30 10.0.0.99" {
		t.Errorf("pool = %+v", p.Spec)
	}
	// More exclusions than a pool takes: the range is refused, so no pool can drop any of them
	// (the store used to record none, and could hand out excluded addresses).
	spec := ipam.RangeSpec{Range: "10.1.0.0/16"}
	for i := range 300 {
		spec.Exclude = append(spec.Exclude, fmt.Sprintf("10.1.%d.%d", i/100, 2*(i%100)+1))
	}
	if _, err := ipam.ParseRange("range", spec, netip.Addr{}); !errors.Is(err, ipam.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), fmt.Sprintf("more than %d CIDRs", ippool.MaxExclude)) {
		t.Errorf("ParseRange of 300 exclusions = %v, want the exclusion limit", err)
	}
}

func TestFreeIn(t *testing.T) {
	r, err := ipam.ParseRange("range", ipam.RangeSpec{Range: "10.0.0.0/29", Exclude: []string{"10.0.0.3"}}, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	taken := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.5")}
	var got []string
	for a := range freeIn(r, taken) {
		got = append(got, a.String())
	}
	if strings.Join(got, " ") != "10.0.0.2 10.0.0.4 10.0.0.6" {
		t.Errorf("free = %v", got)
	}
	for range freeIn(r, taken) {
		break // the consumer may stop early
	}
}

// TestCandidatesRoundRobin checks the order a node tries its blocks in: after the last choice,
// round the other blocks, and back to the start of the cursor's block; full blocks are skipped.
func TestCandidatesRoundRobin(t *testing.T) {
	g, err := newGeometry(netip.MustParsePrefix("10.0.0.0/28"), 30) // blocks of 4
	if err != nil {
		t.Fatal(err)
	}
	r, err := ipam.ParseRange("range", ipam.RangeSpec{Range: "10.0.0.0/28"}, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	st := &poolState{name: "p", geo: g, full: map[uint64]ipam.Interval{}, inflight: map[string]netip.Addr{}}
	for _, i := range []uint64{0, 2} {
		st.addSlice(ownSlice{index: i, prefix: g.block(i)})
	}
	held := map[string]bool{"10.0.0.2": true}
	taken := func(a netip.Addr) bool { return held[a.String()] }
	all := func() string {
		var out []string
		for a := range st.candidates(r, taken) {
			out = append(out, a.String())
		}
		return strings.Join(out, " ")
	}
	if got := all(); got != "10.0.0.1 10.0.0.3 10.0.0.8 10.0.0.9 10.0.0.10 10.0.0.11" {
		t.Errorf("no cursor: %s", got)
	}
	// Both blocks were scanned to their end without a taker: full until a release in them.
	if len(st.full) != 2 {
		t.Errorf("full = %v, want both blocks", st.full)
	}
	if got := all(); got != "" {
		t.Errorf("full blocks scanned again: %s", got)
	}
	clear(st.full)
	st.cursor = netip.MustParseAddr("10.0.0.9")
	if got := all(); got != "10.0.0.10 10.0.0.11 10.0.0.1 10.0.0.3 10.0.0.8 10.0.0.9" {
		t.Errorf("cursor 10.0.0.9: %s", got)
	}
	// Block 2 was scanned in two parts around the cursor: only block 0 counts as full.
	if _, full := st.full[2]; full || len(st.full) != 1 {
		t.Errorf("full = %v, want block 0 only", st.full)
	}
	// A config with a wider window than the one that marked block 0 scans it again.
	wide, err := ipam.ParseRange("range", ipam.RangeSpec{Range: "10.0.0.0/28"}, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	narrow, err := ipam.ParseRange("range", ipam.RangeSpec{Range: "10.0.0.0/28", RangeStart: "10.0.0.2"}, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	st.full[0] = ipam.Interval{First: netip.MustParseAddr("10.0.0.2"), Last: netip.MustParseAddr("10.0.0.3")}
	var got []string
	for a := range st.sliceCandidates(st.slices[0], wide, taken) {
		got = append(got, a.String())
	}
	if strings.Join(got, " ") != "10.0.0.1 10.0.0.3" {
		t.Errorf("wider window over a block marked by a narrower one: %v", got)
	}
	st.full[0] = ipam.Interval{First: netip.MustParseAddr("10.0.0.1"), Last: netip.MustParseAddr("10.0.0.3")}
	for a := range st.sliceCandidates(st.slices[0], narrow, taken) {
		t.Errorf("narrower window scanned a full block: %s", a)
	}
	if got := all(); got != "10.0.0.10 10.0.0.11 10.0.0.8 10.0.0.9" {
		t.Errorf("with block 0 full: %s", got)
	}
	// A Create in flight in a block keeps it from being marked full.
	st.full = map[uint64]ipam.Interval{}
	st.inflight["x"] = netip.MustParseAddr("10.0.0.1")
	_ = all()
	if _, full := st.full[0]; full {
		t.Error("a block with a Create in flight was marked full")
	}
	st.cursor = netip.MustParseAddr("10.0.0.5") // in no block of the node: start at the next block
	st.inflight = map[string]netip.Addr{}
	if got := all(); !strings.HasPrefix(got, "10.0.0.8 ") {
		t.Errorf("cursor outside the blocks: %s", got)
	}
	if idx := slices.IndexFunc(st.slices, func(o ownSlice) bool { return o.index == 2 }); idx != 1 {
		t.Errorf("slices out of order: %v", st.slices)
	}
}

func TestNewRejectsBadNodeName(t *testing.T) {
	for _, name := range []string{"", "Node-A", "node_a", strings.Repeat("a", 254)} {
		if _, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{NodeName: name}); err == nil || !strings.Contains(err.Error(), "is not a valid Kubernetes node name") {
			t.Errorf("New(%q) = %v", name, err)
		}
	}
	s, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{NodeName: "node-a"})
	if err != nil || s.Node() != "node-a" || s.opts.APITimeout != DefaultAPITimeout || s.opts.RetryInterval != DefaultRetryInterval {
		t.Errorf("New() = %+v, %v", s, err)
	}
}
