package ippool

import (
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

func TestParseErrorsNameTheSpecField(t *testing.T) {
	tests := []struct {
		spec ipamv1.IPPoolSpec
		want string
	}{
		{ipamv1.IPPoolSpec{Range: "10.0.0.0/24", Gateway: "gw"}, `spec.gateway "gw": not an IP address`},
		{ipamv1.IPPoolSpec{Range: "10.0.0.0/33"}, `spec.range "10.0.0.0/33": not a CIDR (want e.g. 10.0.0.0/24 or fd00::/64)`},
		{ipamv1.IPPoolSpec{Range: "10.0.0.0/24", RangeStart: "10.0.0.9", RangeEnd: "10.0.0.5"}, `spec.rangeStart "10.0.0.9": is after range_end 10.0.0.5`},
		{ipamv1.IPPoolSpec{Range: "10.0.0.0/16", Exclude: spacedExcludes(MaxExclude + 1)}, `spec.exclude: the exclusions make more than 256 CIDRs once merged and clipped to the window 10.0.0.1-10.0.255.254; at most 256 are allowed`},
	}
	for _, tt := range tests {
		_, err := Parse(&ipamv1.IPPool{Spec: tt.spec})
		if err == nil || err.Error() != tt.want {
			t.Errorf("Parse(%+v) = %v, want %q", tt.spec, err, tt.want)
		}
	}
}

func spacedExcludes(n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = netip.AddrFrom4([4]byte{10, 0, byte(i / 100), byte(2*(i%100) + 1)}).String()
	}
	return out
}

func TestClassify(t *testing.T) {
	p, err := Parse(&ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: ipamv1.IPPoolSpec{
		Range: "10.0.0.0/24", RangeStart: "10.0.0.10", RangeEnd: "10.0.0.100", Exclude: []string{"10.0.0.16/28"}, Gateway: "10.0.0.20"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		addr string
		want AddressClass
	}{
		{"10.0.0.10", AddressUsable},
		{"10.0.0.100", AddressUsable},
		{"10.0.1.1", AddressOutside},
		{"fd00::1", AddressOutside},
		{"10.0.0.0", AddressReserved},
		{"10.0.0.255", AddressReserved},
		{"10.0.0.9", AddressOutsideWindow},
		{"10.0.0.101", AddressOutsideWindow},
		{"10.0.0.20", AddressGateway},
		{"10.0.0.17", AddressExcluded},
	}
	for _, tt := range tests {
		got, why := p.Classify(netip.MustParseAddr(tt.addr))
		if got != tt.want || (got == AddressUsable) != (why == "") {
			t.Errorf("Classify(%s) = %s %q, want %s", tt.addr, got, why, tt.want)
		}
	}
	if p.Capacity().String() != "75" { // .10-.100 is 91, less .16-.31
		t.Errorf("capacity %s", p.Capacity())
	}
}

// TestAPILimitIsTheModelLimit keeps the IPPool API's MaxItems on spec.exclude equal to MaxExclude,
// so a pool the API server accepts is one the model accepts, and the other way round.
func TestAPILimitIsTheModelLimit(t *testing.T) {
	raw, err := os.ReadFile("../../crds/bases/ipam.netpool.io_ippools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "\n              exclude:\n")
	if !ok {
		t.Fatal("the IPPool CRD has no spec.exclude")
	}
	m := regexp.MustCompile(`maxItems: (\d+)`).FindStringSubmatch(rest)
	if m == nil || m[1] != strconv.Itoa(MaxExclude) {
		t.Fatalf("spec.exclude maxItems %v, want %d", m, MaxExclude)
	}
}
