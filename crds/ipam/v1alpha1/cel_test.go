package v1alpha1_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/test/envtest"
)

// These tests run every validation rule of the CRDs (OpenAPI bounds and CEL x-kubernetes-validations)
// against a real kube-apiserver, in the manner of gateway-api's tests/cel: each case mutates a valid
// object before Create (or before Update, after creating it valid) and lists the substrings the
// apiserver's error must contain; no substrings means the object must be accepted.

// seq makes object names unique within the shared apiserver.
var seq atomic.Int64

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, seq.Add(1))
}

// checkErr fails unless err is an Invalid error containing every one of want, or nil when want is empty.
func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("got error %v, want the object accepted", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("object accepted, want an error containing %q", want)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("got %v, want an Invalid error", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not contain %q", err, w)
		}
	}
}

func TestCEL(t *testing.T) {
	env := envtest.Start(t)
	t.Run("IPPool create", func(t *testing.T) { testIPPoolCreate(t, env) })
	t.Run("IPPool rangeStart and rangeEnd order", func(t *testing.T) { testIPPoolOrder(t, env) })
	t.Run("IPPool update", func(t *testing.T) { testIPPoolUpdate(t, env) })
	t.Run("IPPool status", func(t *testing.T) { testIPPoolStatus(t, env) })
	t.Run("OverlappingRangeIPReservation create", func(t *testing.T) { testReservationCreate(t, env) })
	t.Run("OverlappingRangeIPReservation update", func(t *testing.T) { testReservationUpdate(t, env) })
	t.Run("IPPoolSlice create", func(t *testing.T) { testSliceCreate(t, env) })
	t.Run("IPPoolSlice update", func(t *testing.T) { testSliceUpdate(t, env) })
	t.Run("selectable fields", func(t *testing.T) { testSelectableFields(t, env) })
	t.Run("printer columns", func(t *testing.T) { testPrinterColumns(t, env) })
}

func validPool() *ipamv1.IPPool {
	return &ipamv1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: uniqueName("pool")},
		Spec:       ipamv1.IPPoolSpec{Range: "10.0.0.0/24"},
	}
}

func testIPPoolCreate(t *testing.T, env *envtest.Env) {
	tests := []struct {
		name       string
		mutate     func(p *ipamv1.IPPool)
		wantErrors []string
	}{
		{name: "minimal IPv4 pool", mutate: func(*ipamv1.IPPool) {}},
		{
			name: "every field of an IPv4 pool",
			mutate: func(p *ipamv1.IPPool) {
				p.Spec = ipamv1.IPPoolSpec{
					Range: "10.0.0.0/16", RangeStart: "10.0.0.10", RangeEnd: "10.0.255.200", Gateway: "10.0.0.1",
					Exclude:     []string{"10.0.1.0/24", "10.0.2.7", "10.0.3.5/30"},
					NetworkName: "net1", SliceSize: 26,
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
					NodeSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"role": "worker"}},
				}
			},
		},
		{
			name: "every address field of an IPv6 pool",
			mutate: func(p *ipamv1.IPPool) {
				p.Spec = ipamv1.IPPoolSpec{
					Range: "fd00:10::/64", RangeStart: "fd00:10::10", RangeEnd: "fd00:10::ffff:0:ff", Gateway: "fd00:10::1",
					Exclude: []string{"fd00:10::100/120", "fd00:10::7"}, SliceSize: 120,
				}
			},
		},
		{name: "rangeStart equal to rangeEnd", mutate: func(p *ipamv1.IPPool) { p.Spec.RangeStart, p.Spec.RangeEnd = "10.0.0.9", "10.0.0.9" }},
		{name: "only rangeStart", mutate: func(p *ipamv1.IPPool) { p.Spec.RangeStart = "10.0.0.200" }},
		{name: "only rangeEnd", mutate: func(p *ipamv1.IPPool) { p.Spec.RangeEnd = "10.0.0.2" }},
		{
			name: "rangeStart below rangeEnd across the first bit",
			mutate: func(p *ipamv1.IPPool) {
				p.Spec.Range, p.Spec.RangeStart, p.Spec.RangeEnd = "0.0.0.0/0", "127.255.255.255", "128.0.0.0"
			},
		},
		{name: "sliceSize equal to the range's prefix", mutate: func(p *ipamv1.IPPool) { p.Spec.SliceSize = 24 }},
		{name: "sliceSize of single addresses", mutate: func(p *ipamv1.IPPool) { p.Spec.SliceSize = 32 }},
		{name: "sliceSize 0 lets the allocator choose", mutate: func(p *ipamv1.IPPool) { p.Spec.SliceSize = 0 }},

		{name: "overlappingRanges Disabled", mutate: func(p *ipamv1.IPPool) { p.Spec.OverlappingRanges = ipamv1.OverlappingRangesDisabled }},
		{name: "overlappingRanges of another value", mutate: func(p *ipamv1.IPPool) { p.Spec.OverlappingRanges = "Sometimes" }, wantErrors: []string{`spec.overlappingRanges: Unsupported value: "Sometimes"`}},
		{name: "missing range", mutate: func(p *ipamv1.IPPool) { p.Spec.Range = "" }, wantErrors: []string{"spec.range: Required value"}},
		{name: "range is not a CIDR", mutate: func(p *ipamv1.IPPool) { p.Spec.Range = "banana" }, wantErrors: []string{"range must be a CIDR such as 10.0.0.0/24 or fd00::/64"}},
		{name: "range prefix too long", mutate: func(p *ipamv1.IPPool) { p.Spec.Range = "10.0.0.0/33" }, wantErrors: []string{"range must be a CIDR"}},
		{name: "range is an address", mutate: func(p *ipamv1.IPPool) { p.Spec.Range = "10.0.0.0" }, wantErrors: []string{"range must be a CIDR"}},
		{name: "range with leading zeros", mutate: func(p *ipamv1.IPPool) { p.Spec.Range = "010.0.0.0/24" }, wantErrors: []string{"range must be a CIDR"}},
		{name: "range with host bits", mutate: func(p *ipamv1.IPPool) { p.Spec.Range = "10.0.0.1/24" }, wantErrors: []string{"range 10.0.0.1/24 must be written as its network address in canonical form"}},
		{name: "range IPv6 not canonical", mutate: func(p *ipamv1.IPPool) { p.Spec.Range = "FD00:0::/64" }, wantErrors: []string{"range FD00:0::/64 must be written as its network address in canonical form"}},
		{name: "range too long", mutate: func(p *ipamv1.IPPool) { p.Spec.Range = strings.Repeat("1", 44) }, wantErrors: []string{"spec.range: Too long"}},

		{name: "rangeStart is not an IP", mutate: func(p *ipamv1.IPPool) { p.Spec.RangeStart = "10.0.0.256" }, wantErrors: []string{"rangeStart must be an IP address"}},
		{name: "rangeEnd is not an IP", mutate: func(p *ipamv1.IPPool) { p.Spec.RangeEnd = "10.0.0.1/32" }, wantErrors: []string{"rangeEnd must be an IP address"}},
		{name: "gateway is not an IP", mutate: func(p *ipamv1.IPPool) { p.Spec.Gateway = "gw" }, wantErrors: []string{"gateway must be an IP address"}},
		{name: "gateway is IPv4-mapped IPv6", mutate: func(p *ipamv1.IPPool) { p.Spec.Gateway = "::ffff:10.0.0.1" }, wantErrors: []string{"gateway must be an IP address"}},
		{
			name:       "rangeStart IPv6 not canonical",
			mutate:     func(p *ipamv1.IPPool) { p.Spec.Range, p.Spec.RangeStart = "fd00::/64", "fd00::0001" },
			wantErrors: []string{"rangeStart fd00::0001 must be in canonical form"},
		},
		{
			name:       "rangeEnd IPv6 uppercase",
			mutate:     func(p *ipamv1.IPPool) { p.Spec.Range, p.Spec.RangeEnd = "fd00::/64", "FD00::1" },
			wantErrors: []string{"rangeEnd FD00::1 must be in canonical form"},
		},
		{
			name:       "gateway IPv6 not compressed",
			mutate:     func(p *ipamv1.IPPool) { p.Spec.Range, p.Spec.Gateway = "fd00::/64", "fd00:0:0:0:0:0:0:1" },
			wantErrors: []string{"gateway fd00:0:0:0:0:0:0:1 must be in canonical form"},
		},

		{name: "rangeStart outside range", mutate: func(p *ipamv1.IPPool) { p.Spec.RangeStart = "10.0.1.1" }, wantErrors: []string{"rangeStart 10.0.1.1 is not inside range 10.0.0.0/24"}},
		{name: "rangeEnd outside range", mutate: func(p *ipamv1.IPPool) { p.Spec.RangeEnd = "9.255.255.255" }, wantErrors: []string{"rangeEnd 9.255.255.255 is not inside range 10.0.0.0/24"}},
		{name: "gateway outside range", mutate: func(p *ipamv1.IPPool) { p.Spec.Gateway = "10.0.1.1" }, wantErrors: []string{"gateway 10.0.1.1 is not inside range 10.0.0.0/24"}},
		{name: "gateway of the other family", mutate: func(p *ipamv1.IPPool) { p.Spec.Gateway = "fd00::1" }, wantErrors: []string{"gateway fd00::1 is not inside range 10.0.0.0/24"}},

		{
			name:       "rangeStart after rangeEnd",
			mutate:     func(p *ipamv1.IPPool) { p.Spec.RangeStart, p.Spec.RangeEnd = "10.0.0.100", "10.0.0.50" },
			wantErrors: []string{"rangeStart 10.0.0.100 is after rangeEnd 10.0.0.50"},
		},
		{
			name:       "rangeStart after rangeEnd by the last bit",
			mutate:     func(p *ipamv1.IPPool) { p.Spec.RangeStart, p.Spec.RangeEnd = "10.0.0.5", "10.0.0.4" },
			wantErrors: []string{"rangeStart 10.0.0.5 is after rangeEnd 10.0.0.4"},
		},
		{
			name: "rangeStart after rangeEnd by the first bit",
			mutate: func(p *ipamv1.IPPool) {
				p.Spec.Range, p.Spec.RangeStart, p.Spec.RangeEnd = "0.0.0.0/0", "128.0.0.0", "127.255.255.255"
			},
			wantErrors: []string{"rangeStart 128.0.0.0 is after rangeEnd 127.255.255.255"},
		},
		{
			name: "IPv6 rangeStart after rangeEnd by the last bit",
			mutate: func(p *ipamv1.IPPool) {
				p.Spec.Range, p.Spec.RangeStart, p.Spec.RangeEnd = "fd00::/64", "fd00::1", "fd00::"
			},
			wantErrors: []string{"rangeStart fd00::1 is after rangeEnd fd00::"},
		},
		{
			name: "IPv6 rangeStart after rangeEnd in a high group",
			mutate: func(p *ipamv1.IPPool) {
				p.Spec.Range, p.Spec.RangeStart, p.Spec.RangeEnd = "fd00::/48", "fd00:0:0:1::", "fd00::ffff:ffff:ffff:ffff"
			},
			wantErrors: []string{"rangeStart fd00:0:0:1:: is after rangeEnd fd00::ffff:ffff:ffff:ffff"},
		},

		{name: "exclude entry is neither IP nor CIDR", mutate: func(p *ipamv1.IPPool) { p.Spec.Exclude = []string{"10.0.0.7", "nope"} }, wantErrors: []string{"every exclude entry must be an IP address or CIDR inside range"}},
		{name: "exclude address outside range", mutate: func(p *ipamv1.IPPool) { p.Spec.Exclude = []string{"10.0.1.7"} }, wantErrors: []string{"every exclude entry must be an IP address or CIDR inside range"}},
		{name: "exclude CIDR wider than range", mutate: func(p *ipamv1.IPPool) { p.Spec.Exclude = []string{"10.0.0.0/16"} }, wantErrors: []string{"every exclude entry must be an IP address or CIDR inside range"}},
		{name: "exclude duplicate", mutate: func(p *ipamv1.IPPool) { p.Spec.Exclude = []string{"10.0.0.7", "10.0.0.7"} }, wantErrors: []string{"spec.exclude[1]: Duplicate value"}},
		{name: "exclude entry too long", mutate: func(p *ipamv1.IPPool) { p.Spec.Exclude = []string{strings.Repeat("1", 50)} }, wantErrors: []string{"spec.exclude[0]: Too long"}},

		{name: "sliceSize shorter than the range's prefix", mutate: func(p *ipamv1.IPPool) { p.Spec.SliceSize = 16 }, wantErrors: []string{"sliceSize must be 0 or a prefix length from the range's own prefix length up to 32 (IPv4) or 128 (IPv6)"}},
		{name: "sliceSize past the IPv4 width", mutate: func(p *ipamv1.IPPool) { p.Spec.SliceSize = 33 }, wantErrors: []string{"sliceSize must be 0 or a prefix length"}},
		{name: "sliceSize past any width", mutate: func(p *ipamv1.IPPool) { p.Spec.SliceSize = 129 }, wantErrors: []string{"spec.sliceSize: Invalid value: 129: spec.sliceSize in body should be less than or equal to 128"}},
		{name: "sliceSize negative", mutate: func(p *ipamv1.IPPool) { p.Spec.SliceSize = -1 }, wantErrors: []string{"spec.sliceSize in body should be greater than or equal to 0"}},
		{name: "networkName too long", mutate: func(p *ipamv1.IPPool) { p.Spec.NetworkName = strings.Repeat("n", 254) }, wantErrors: []string{"spec.networkName: Too long"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPool()
			tt.mutate(p)
			checkErr(t, env.Client.Create(t.Context(), p), tt.wantErrors)
		})
	}
}

// testIPPoolOrder checks the CEL rule "rangeStart <= rangeEnd" (CEL has no ordering of IPs; the
// rule finds the first differing bit through CIDR masks) against netip's order, on random address
// pairs and on pairs that differ in a single random bit, of both families.
func testIPPoolOrder(t *testing.T, env *envtest.Env) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(bytes int) netip.Addr {
		b := make([]byte, bytes)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		a, _ := netip.AddrFromSlice(b)
		return a
	}
	flipBit := func(a netip.Addr) netip.Addr {
		b := a.AsSlice()
		bit := rng.IntN(len(b) * 8)
		b[bit/8] ^= 0x80 >> (bit % 8)
		out, _ := netip.AddrFromSlice(b)
		return out
	}
	for i := range 64 {
		bytes, whole := 4, "0.0.0.0/0"
		if i%2 == 1 {
			bytes, whole = 16, "::/0"
		}
		start := random(bytes)
		end := random(bytes)
		if i%4 >= 2 {
			end = flipBit(start)
		}
		p := validPool()
		p.Spec.Range, p.Spec.RangeStart, p.Spec.RangeEnd = whole, start.String(), end.String()
		var want []string
		if start.Compare(end) > 0 {
			want = []string{"rangeStart " + start.String() + " is after rangeEnd " + end.String()}
		}
		t.Run(start.String()+" to "+end.String(), func(t *testing.T) {
			checkErr(t, env.Client.Create(t.Context(), p, client.DryRunAll), want)
		})
	}
}

func testIPPoolUpdate(t *testing.T, env *envtest.Env) {
	tests := []struct {
		name       string
		initial    func(p *ipamv1.IPPool)
		mutate     func(p *ipamv1.IPPool)
		wantErrors []string
	}{
		{name: "narrowing rangeStart and rangeEnd", mutate: func(p *ipamv1.IPPool) { p.Spec.RangeStart, p.Spec.RangeEnd = "10.0.0.20", "10.0.0.30" }},
		{name: "changing the gateway, exclusions and selectors", mutate: func(p *ipamv1.IPPool) {
			p.Spec.Gateway, p.Spec.Exclude = "10.0.0.254", []string{"10.0.0.128/25"}
			p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
		}},
		{name: "keeping sliceSize", initial: func(p *ipamv1.IPPool) { p.Spec.SliceSize = 28 }, mutate: func(p *ipamv1.IPPool) { p.Spec.Gateway = "10.0.0.1" }},

		{name: "changing range", mutate: func(p *ipamv1.IPPool) { p.Spec.Range = "10.0.1.0/24" }, wantErrors: []string{"range is immutable; create a new pool for a different range"}},
		{name: "widening range", mutate: func(p *ipamv1.IPPool) { p.Spec.Range = "10.0.0.0/23" }, wantErrors: []string{"range is immutable"}},
		{name: "changing sliceSize", initial: func(p *ipamv1.IPPool) { p.Spec.SliceSize = 28 }, mutate: func(p *ipamv1.IPPool) { p.Spec.SliceSize = 26 }, wantErrors: []string{"sliceSize is immutable"}},
		{name: "setting sliceSize later", mutate: func(p *ipamv1.IPPool) { p.Spec.SliceSize = 26 }, wantErrors: []string{"sliceSize is immutable"}},
		{name: "unsetting sliceSize", initial: func(p *ipamv1.IPPool) { p.Spec.SliceSize = 28 }, mutate: func(p *ipamv1.IPPool) { p.Spec.SliceSize = 0 }, wantErrors: []string{"sliceSize is immutable"}},
		{name: "keeping overlappingRanges Enabled by writing it out", mutate: func(p *ipamv1.IPPool) { p.Spec.OverlappingRanges = ipamv1.OverlappingRangesEnabled }},
		{name: "disabling overlappingRanges", mutate: func(p *ipamv1.IPPool) { p.Spec.OverlappingRanges = ipamv1.OverlappingRangesDisabled },
			wantErrors: []string{"overlappingRanges is immutable: the pool's reservations are named for it; create a new pool instead"}},
		{name: "enabling overlappingRanges", initial: func(p *ipamv1.IPPool) { p.Spec.OverlappingRanges = ipamv1.OverlappingRangesDisabled },
			mutate: func(p *ipamv1.IPPool) { p.Spec.OverlappingRanges = "" }, wantErrors: []string{"overlappingRanges is immutable"}},
		{name: "moving rangeStart after rangeEnd", initial: func(p *ipamv1.IPPool) { p.Spec.RangeEnd = "10.0.0.50" }, mutate: func(p *ipamv1.IPPool) { p.Spec.RangeStart = "10.0.0.51" }, wantErrors: []string{"rangeStart 10.0.0.51 is after rangeEnd 10.0.0.50"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPool()
			if tt.initial != nil {
				tt.initial(p)
			}
			if err := env.Client.Create(t.Context(), p); err != nil {
				t.Fatalf("creating the initial pool: %v", err)
			}
			tt.mutate(p)
			checkErr(t, env.Client.Update(t.Context(), p), tt.wantErrors)
		})
	}
}

func testIPPoolStatus(t *testing.T, env *envtest.Env) {
	tests := []struct {
		name       string
		status     ipamv1.IPPoolStatus
		wantErrors []string
	}{
		{name: "IPv6-sized counts", status: ipamv1.IPPoolStatus{Capacity: "18446744073709551616", Allocated: ptr.To[int64](3), Free: "18446744073709551613", ObservedGeneration: 1}},
		{name: "empty pool", status: ipamv1.IPPoolStatus{Capacity: "0", Allocated: ptr.To[int64](0), Free: "0"}},
		{name: "capacity not a number", status: ipamv1.IPPoolStatus{Capacity: "lots"}, wantErrors: []string{`status.capacity: Invalid value: "lots": capacity in body should match`}},
		{name: "free with a leading zero", status: ipamv1.IPPoolStatus{Free: "01"}, wantErrors: []string{`status.free: Invalid value: "01": free in body should match`}},
		{name: "negative allocated", status: ipamv1.IPPoolStatus{Allocated: ptr.To[int64](-1)}, wantErrors: []string{"status.allocated: Invalid value: -1: allocated in body should be greater than or equal to 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPool()
			if err := env.Client.Create(t.Context(), p); err != nil {
				t.Fatalf("creating the pool: %v", err)
			}
			p.Status = tt.status
			checkErr(t, env.Client.Status().Update(t.Context(), p), tt.wantErrors)
		})
	}

	// The status subresource keeps spec changes out of status updates and the reverse.
	p := validPool()
	if err := env.Client.Create(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Gateway = "10.0.0.1"
	p.Status.Capacity = "254"
	if err := env.Client.Status().Update(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	var got ipamv1.IPPool
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(p), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Gateway != "" || got.Status.Capacity != "254" {
		t.Fatalf("after a status update: gateway %q (want unset), capacity %q (want 254)", got.Spec.Gateway, got.Status.Capacity)
	}
}

// validReservation is a reservation of 10.0.0.7 in a pool of its own, named as the allocator names it.
func validReservation() *ipamv1.OverlappingRangeIPReservation {
	pool := uniqueName("pool")
	return &ipamv1.OverlappingRangeIPReservation{
		ObjectMeta: metav1.ObjectMeta{Name: pool + ".10.0.0.7"},
		Spec: ipamv1.OverlappingRangeIPReservationSpec{
			Address: "10.0.0.7", Pool: pool, ContainerID: "0123abcd", IfName: "net1", Node: "node-a",
		},
	}
}

func testReservationCreate(t *testing.T, env *envtest.Env) {
	tests := []struct {
		name       string
		mutate     func(r *ipamv1.OverlappingRangeIPReservation)
		wantErrors []string
	}{
		{name: "minimal", mutate: func(*ipamv1.OverlappingRangeIPReservation) {}},
		{name: "every field, IPv6", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec = ipamv1.OverlappingRangeIPReservationSpec{
				Address: "fd00::7", Pool: "blue-fd00---64", ContainerID: "k8s_pod.1-x", IfName: "eth1",
				PodRef: "default/web-0.a", PodUID: "4f3c2b1a-0000-4000-8000-000000000001", Node: "node-a.example.com", NetworkName: "blue",
			}
			r.Name = uniqueName("blue") + ".fd00--7"
			r.Spec.NetworkName = strings.TrimSuffix(r.Name, ".fd00--7")
		}},

		// The name is the lock on the address: it must be ReservationName(scope, address).
		{name: "name of the network scope", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.NetworkName = uniqueName("net")
			r.Name = r.Spec.NetworkName + ".10.0.0.7"
		}},
		{name: "name of the unnamed network scope", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.Address = "10.250.0." + fmt.Sprint(seq.Add(1)%250)
			r.Name = r.Spec.Address
		}},
		{name: "IPv6 names as ReservationName writes them", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.Address = "fd00::"
			r.Name = ipamv1.ReservationName(r.Spec.Pool, netip.MustParseAddr("fd00::"))
		}},
		{name: "IPv6 address starting with ::", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.Address = "::7"
			r.Name = ipamv1.ReservationName(r.Spec.Pool, netip.MustParseAddr("::7"))
		}},
		{name: "scope shortened with a hash", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.NetworkName = strings.Repeat("n", 240) + uniqueName("")
			r.Name = ipamv1.ReservationName(r.Spec.NetworkName, netip.MustParseAddr("10.0.0.7"))
		}},
		{name: "network name that is not a DNS name", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.NetworkName = "Blue_" + uniqueName("net")
			r.Name = ipamv1.ReservationName(r.Spec.NetworkName, netip.MustParseAddr("10.0.0.7"))
		}},
		{name: "name of another address", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Name = r.Spec.Pool + ".10.0.0.50"
			r.Spec.Address = "10.0.0.51"
		}, wantErrors: []string{"is not a reservation name of spec.address 10.0.0.51", "the name is the lock on the address"}},
		{name: "name of an address that ends the same", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Name = r.Spec.Pool + ".110.0.0.7"
		}, wantErrors: []string{"is not a reservation name of spec.address 10.0.0.7"}},
		{name: "IPv6 name without normalisation", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.Address = "fd00::"
			r.Name = r.Spec.Pool + ".fd00--"
		}, wantErrors: []string{"is not a reservation name of spec.address fd00::"}},
		{name: "IPv6 name of another address", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.Address = "fd00::7"
			r.Name = r.Spec.Pool + ".fd00--8"
		}, wantErrors: []string{"is not a reservation name of spec.address fd00::7"}},
		{name: "scope that is neither pool nor network", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Name = uniqueName("other") + ".10.0.0.7"
		}, wantErrors: []string{"must be <scope>.<address> with the scope spec.pool (" + "pool-"}},
		{name: "scope of a network it does not name", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.NetworkName = uniqueName("blue")
			r.Name = uniqueName("red") + ".10.0.0.7"
		}, wantErrors: []string{"or spec.networkName (blue-"}},

		{name: "address missing", mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.Address = "" }, wantErrors: []string{"spec.address: Required value"}},
		{name: "address is not an IP", mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.Address = "10.0.0.0/24" }, wantErrors: []string{"address must be an IP address"}},
		{name: "address with a zone", mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.Address = "fe80::1%eth0" }, wantErrors: []string{"address must be an IP address"}},
		{name: "address not canonical", mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.Address = "fd00:0::7" }, wantErrors: []string{"address fd00:0::7 must be in canonical form"}},
		{name: "pool missing", mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.Pool = "" }, wantErrors: []string{"spec.pool: Required value"}},
		{name: "containerID missing", mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.ContainerID = "" }, wantErrors: []string{"spec.containerID: Required value"}},
		{name: "containerID with a slash", mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.ContainerID = "a/b" }, wantErrors: []string{"spec.containerID in body should match"}},
		{name: "ifName missing", mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.IfName = "" }, wantErrors: []string{"spec.ifName: Required value"}},
		{name: "ifName too long", mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.IfName = "abcdefghijklmnop" }, wantErrors: []string{"spec.ifName: Too long"}},
		{name: "ifName with a colon", mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.IfName = "eth0:1" }, wantErrors: []string{"spec.ifName in body should match"}},
		{name: "podRef without a namespace", mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.PodRef = "web-0" }, wantErrors: []string{"spec.podRef in body should match"}},
		{name: "node missing", mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.Node = "" }, wantErrors: []string{"spec.node: Required value"}},
		{name: "node not a DNS name", mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.Node = "Node_A" }, wantErrors: []string{"spec.node in body should match"}},

		{name: "owned by an IPAMClaim with its user", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.Owner = &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: "vms", Name: "vm-a.net1"}
			r.Spec.Users = []ipamv1.ReservationUser{{ContainerID: "0123abcd", IfName: "net1", PodRef: "vms/virt-launcher-a", Node: "node-a"}}
		}},
		{name: "owner of an unknown kind", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.Owner = &ipamv1.ReservationOwner{Kind: "Deployment", Namespace: "vms", Name: "a"}
		}, wantErrors: []string{`spec.owner.kind: Unsupported value: "Deployment": supported values: "IPAMClaim"`}},
		{name: "owner without a name", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.Owner = &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: "vms"}
		}, wantErrors: []string{"spec.owner.name: Required value"}},
		{name: "owner namespace not a label", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.Owner = &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: "VMs", Name: "a"}
		}, wantErrors: []string{"spec.owner.namespace in body should match"}},
		{name: "users without an owner", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.Users = []ipamv1.ReservationUser{{ContainerID: "0123abcd", IfName: "net1", Node: "node-a"}}
		}, wantErrors: []string{"users are only recorded for an address with a persistent owner"}},
		{name: "a user without a node", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.Owner = &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: "vms", Name: "a"}
			r.Spec.Users = []ipamv1.ReservationUser{{ContainerID: "0123abcd", IfName: "net1"}}
		}, wantErrors: []string{"spec.users[0].node: Required value"}},
		{name: "more users than a migration needs", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.Owner = &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: "vms", Name: "a"}
			for i := range ipamv1.MaxReservationUsers + 1 {
				r.Spec.Users = append(r.Spec.Users, ipamv1.ReservationUser{ContainerID: fmt.Sprint("c", i), IfName: "net1", Node: "node-a"})
			}
		}, wantErrors: []string{"spec.users: Too many: 9: must have at most 8 items"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validReservation()
			tt.mutate(r)
			checkErr(t, env.Client.Create(t.Context(), r), tt.wantErrors)
		})
	}
}

func testReservationUpdate(t *testing.T, env *envtest.Env) {
	tests := []struct {
		name       string
		owned      bool // created with an IPAMClaim owner and one user
		mutate     func(r *ipamv1.OverlappingRangeIPReservation)
		wantErrors []string
	}{
		{name: "recording the pod", mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.PodRef, r.Spec.PodUID = "ns/pod", "uid-1" }},
		{name: "changing the address", mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.Address = "10.0.0.8" }, wantErrors: []string{"address is immutable; a reservation is the claim on exactly one address"}},
		{name: "changing the pool", mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.Pool = "other" }, wantErrors: []string{"pool is immutable"}},
		{name: "adding an owner", mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.Owner = &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: "vms", Name: "a"}
		}, wantErrors: []string{"owner is immutable: an address keeps its persistent owner until it is released"}},
		{name: "binding a second user", owned: true, mutate: func(r *ipamv1.OverlappingRangeIPReservation) {
			r.Spec.Users = append(r.Spec.Users, ipamv1.ReservationUser{ContainerID: "target", IfName: "net1", Node: "node-b"})
			r.Spec.Node, r.Spec.ContainerID = "node-b", "target"
		}},
		{name: "unbinding every user", owned: true, mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.Users = nil }},
		{name: "changing the owner", owned: true, mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.Owner.Name = "b" },
			wantErrors: []string{"owner is immutable"}},
		{name: "removing the owner", owned: true, mutate: func(r *ipamv1.OverlappingRangeIPReservation) { r.Spec.Owner, r.Spec.Users = nil, nil },
			wantErrors: []string{"owner is immutable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validReservation()
			if tt.owned {
				r.Spec.Owner = &ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: "vms", Name: "a"}
				r.Spec.Users = []ipamv1.ReservationUser{{ContainerID: r.Spec.ContainerID, IfName: r.Spec.IfName, Node: r.Spec.Node}}
			}
			if err := env.Client.Create(t.Context(), r); err != nil {
				t.Fatalf("creating the initial reservation: %v", err)
			}
			tt.mutate(r)
			checkErr(t, env.Client.Update(t.Context(), r), tt.wantErrors)
		})
	}
}

func validSlice() *ipamv1.IPPoolSlice {
	return &ipamv1.IPPoolSlice{
		ObjectMeta: metav1.ObjectMeta{Name: uniqueName("slice")},
		Spec:       ipamv1.IPPoolSliceSpec{Pool: "10.0.0.0-16", Range: "10.0.1.64/26", Node: "node-a"},
	}
}

func testSliceCreate(t *testing.T, env *envtest.Env) {
	tests := []struct {
		name       string
		mutate     func(s *ipamv1.IPPoolSlice)
		wantErrors []string
	}{
		{name: "IPv4", mutate: func(*ipamv1.IPPoolSlice) {}},
		{name: "IPv6", mutate: func(s *ipamv1.IPPoolSlice) { s.Spec.Range = "fd00::100/120" }},
		{name: "pool missing", mutate: func(s *ipamv1.IPPoolSlice) { s.Spec.Pool = "" }, wantErrors: []string{"spec.pool: Required value"}},
		{name: "node missing", mutate: func(s *ipamv1.IPPoolSlice) { s.Spec.Node = "" }, wantErrors: []string{"spec.node: Required value"}},
		{name: "range is not a CIDR", mutate: func(s *ipamv1.IPPoolSlice) { s.Spec.Range = "10.0.1.64" }, wantErrors: []string{"range must be a CIDR such as 10.0.0.64/26 or fd00::/120"}},
		{name: "range with host bits", mutate: func(s *ipamv1.IPPoolSlice) { s.Spec.Range = "10.0.1.65/26" }, wantErrors: []string{"range 10.0.1.65/26 must be written as its network address in canonical form"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSlice()
			tt.mutate(s)
			checkErr(t, env.Client.Create(t.Context(), s), tt.wantErrors)
		})
	}
}

func testSliceUpdate(t *testing.T, env *envtest.Env) {
	tests := []struct {
		name       string
		mutate     func(s *ipamv1.IPPoolSlice)
		wantErrors []string
	}{
		{name: "handing the block to another node", mutate: func(s *ipamv1.IPPoolSlice) { s.Spec.Node = "node-b" }},
		{name: "changing the range", mutate: func(s *ipamv1.IPPoolSlice) { s.Spec.Range = "10.0.1.128/26" }, wantErrors: []string{"range is immutable; delete the slice and claim another"}},
		{name: "changing the pool", mutate: func(s *ipamv1.IPPoolSlice) { s.Spec.Pool = "other" }, wantErrors: []string{"pool is immutable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSlice()
			if err := env.Client.Create(t.Context(), s); err != nil {
				t.Fatalf("creating the initial slice: %v", err)
			}
			tt.mutate(s)
			checkErr(t, env.Client.Update(t.Context(), s), tt.wantErrors)
		})
	}
}

// testSelectableFields lists by spec fields with field selectors, which is how a node finds its own
// reservations and slices without labels.
func testSelectableFields(t *testing.T, env *envtest.Env) {
	ctx := t.Context()
	for _, node := range []string{"sel-node-a", "sel-node-b"} {
		r := validReservation()
		r.Spec.Node, r.Spec.ContainerID = node, "ctr-"+node
		if err := env.Client.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		s := validSlice()
		s.Spec.Node = node
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	var rs ipamv1.OverlappingRangeIPReservationList
	if err := env.Client.List(ctx, &rs, client.MatchingFields{"spec.node": "sel-node-a"}); err != nil {
		t.Fatalf("listing reservations by spec.node: %v", err)
	}
	if len(rs.Items) != 1 || rs.Items[0].Spec.Node != "sel-node-a" {
		t.Fatalf("listing reservations of sel-node-a returned %d items: %+v", len(rs.Items), rs.Items)
	}
	if err := env.Client.List(ctx, &rs, client.MatchingFields{"spec.containerID": "ctr-sel-node-b"}); err != nil {
		t.Fatalf("listing reservations by spec.containerID: %v", err)
	}
	if len(rs.Items) != 1 || rs.Items[0].Spec.Node != "sel-node-b" {
		t.Fatalf("listing reservations of container ctr-sel-node-b returned %d items: %+v", len(rs.Items), rs.Items)
	}
	var ss ipamv1.IPPoolSliceList
	if err := env.Client.List(ctx, &ss, client.MatchingFields{"spec.node": "sel-node-b"}); err != nil {
		t.Fatalf("listing slices by spec.node: %v", err)
	}
	if len(ss.Items) != 1 || ss.Items[0].Spec.Node != "sel-node-b" {
		t.Fatalf("listing slices of sel-node-b returned %d items: %+v", len(ss.Items), ss.Items)
	}
	err := env.Client.List(ctx, &ss, client.MatchingFields{"spec.range": "10.0.1.64/26"})
	if !apierrors.IsBadRequest(err) {
		t.Fatalf("listing slices by a field that is not selectable: got %v, want BadRequest", err)
	}
}

// testPrinterColumns asks the apiserver for the table `kubectl get` prints, and checks the columns
// and the cells of one row of each kind.
func testPrinterColumns(t *testing.T, env *envtest.Env) {
	ctx := t.Context()
	pool := validPool()
	pool.Spec.NetworkName = "net1"
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	pool.Status = ipamv1.IPPoolStatus{
		Capacity: "254", Allocated: ptr.To[int64](4), Free: "250", ObservedGeneration: 1,
		Conditions: []metav1.Condition{{
			Type: ipamv1.IPPoolReadyCondition, Status: metav1.ConditionTrue, Reason: ipamv1.IPPoolAvailableReason,
			Message: "250 of 254 addresses free", LastTransitionTime: metav1.Now(), ObservedGeneration: 1,
		}},
	}
	if err := env.Client.Status().Update(ctx, pool); err != nil {
		t.Fatal(err)
	}
	res := validReservation()
	res.Spec.PodRef = "default/web-0"
	if err := env.Client.Create(ctx, res); err != nil {
		t.Fatal(err)
	}
	slice := validSlice()
	if err := env.Client.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		resource string
		name     string
		columns  []string
		cells    []any // the row's cells before Age
	}{
		{
			resource: "ippools", name: pool.Name,
			columns: []string{"Name", "Range", "Capacity", "Used", "Free", "Ready", "Network", "Age"},
			cells:   []any{pool.Name, "10.0.0.0/24", "254", float64(4), "250", "True", "net1"},
		},
		{
			resource: "overlappingrangeipreservations", name: res.Name,
			columns: []string{"Name", "Address", "Pool", "Node", "Pod", "Container", "Interface", "Age"},
			cells:   []any{res.Name, "10.0.0.7", res.Spec.Pool, "node-a", "default/web-0", "0123abcd", "net1"},
		},
		{
			resource: "ippoolslices", name: slice.Name,
			columns: []string{"Name", "Pool", "Range", "Node", "Age"},
			cells:   []any{slice.Name, "10.0.0.0-16", "10.0.1.64/26", "node-a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.resource, func(t *testing.T) {
			table := getTable(t, env.Config, tt.resource, tt.name)
			var names []string
			for _, c := range table.ColumnDefinitions {
				names = append(names, c.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.columns, ",") {
				t.Fatalf("columns %q, want %q", names, tt.columns)
			}
			if len(table.Rows) != 1 {
				t.Fatalf("%d rows, want 1", len(table.Rows))
			}
			cells := table.Rows[0].Cells
			if len(cells) != len(tt.columns) {
				t.Fatalf("%d cells %v, want %d", len(cells), cells, len(tt.columns))
			}
			for i, want := range tt.cells {
				if cells[i] != want {
					t.Errorf("column %s = %#v, want %#v", tt.columns[i], cells[i], want)
				}
			}
		})
	}
}

// getTable fetches one object as the meta.k8s.io Table that kubectl get renders.
func getTable(t *testing.T, cfg *rest.Config, resource, name string) *metav1.Table {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := strings.TrimSuffix(cfg.Host, "/") + "/apis/" + ipamv1.GroupVersion.String() + "/" + resource + "?fieldSelector=metadata.name%3D" + name
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }() // the body is read in full below; a close error loses nothing
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatalf("decoding the table: %v", err)
	}
	return &table
}
