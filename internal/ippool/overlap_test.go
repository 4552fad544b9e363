package ippool

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

func TestOverlapText(t *testing.T) {
	operator := poolOf("tenant-b-pool", "corp", "10.95.0.0/28", false)
	derived := poolOf("corp-10.95.0.0-28", "corp", "10.95.0.0/28", true)
	wider := poolOf("corp-10.95.0.0-24", "corp", "10.95.0.0/24", true)
	tests := []struct {
		name  string
		pool  ipamv1.IPPool
		peers []ipamv1.IPPool
		want  string
	}{
		{name: "a derived pool yields to an operator's", pool: derived, peers: []ipamv1.IPPool{operator},
			want: `spec.range "10.95.0.0/28": the window 10.95.0.1-10.95.0.14 overlaps IPPool tenant-b-pool (10.95.0.1-10.95.0.14, an operator's pool) of network "corp"`},
		{name: "an operator's pool does not yield to a derived one", pool: operator, peers: []ipamv1.IPPool{derived, wider}},
		{name: "of two derived pools the newer yields", pool: at(derived, 2000), peers: []ipamv1.IPPool{at(wider, 1000)},
			want: `spec.range "10.95.0.0/28": the window 10.95.0.1-10.95.0.14 overlaps IPPool corp-10.95.0.0-24 (10.95.0.1-10.95.0.254) of network "corp"`},
		{name: "of two derived pools the older stays valid", pool: at(wider, 1000), peers: []ipamv1.IPPool{at(derived, 2000)}},
		{name: "of two derived pools made at once the name decides", pool: derived, peers: []ipamv1.IPPool{wider},
			want: `overlaps IPPool corp-10.95.0.0-24`},
		{name: "of two derived pools made at once the first name stays valid", pool: wider, peers: []ipamv1.IPPool{derived}},
		{name: "two operator pools are both invalid", pool: operator, peers: []ipamv1.IPPool{poolOf("other", "corp", "10.95.0.8/29", false)},
			want: `spec.range "10.95.0.0/28": the window 10.95.0.1-10.95.0.14 overlaps IPPool other (10.95.0.9-10.95.0.14) of network "corp"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OverlapText(mustParse(t, tt.pool), tt.peers); got != tt.want && (tt.want == "" || !strings.Contains(got, tt.want)) {
				t.Fatalf("OverlapText = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestServing(t *testing.T) {
	withReady := func(status metav1.ConditionStatus, reason, msg string) *ipamv1.IPPool {
		p := poolOf("p", "", "10.0.0.0/24", false)
		p.Status.Conditions = []metav1.Condition{{Type: ipamv1.IPPoolReadyCondition, Status: status, Reason: reason, Message: msg}}
		return &p
	}
	fresh := poolOf("p", "", "10.0.0.0/24", false)
	tests := []struct {
		name string
		pool *ipamv1.IPPool
		want string
	}{
		{name: "no verdict yet", pool: &fresh},
		{name: "Ready", pool: withReady(metav1.ConditionTrue, ipamv1.IPPoolAvailableReason, "")},
		{name: "exhausted: the allocator judges it live", pool: withReady(metav1.ConditionFalse, ipamv1.IPPoolExhaustedReason, "0 free")},
		{name: "invalid", pool: withReady(metav1.ConditionFalse, ipamv1.IPPoolInvalidSpecReason, "overlaps IPPool q"),
			want: "IPPool p is not Ready (InvalidSpec): overlaps IPPool q"},
		{name: "unknown", pool: withReady(metav1.ConditionUnknown, "Pending", "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Serving(tt.pool)
			if (tt.want == "") != (err == nil) || err != nil && err.Error() != tt.want {
				t.Fatalf("Serving = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestCheckDerivedCount(t *testing.T) {
	if err := CheckDerivedCount(MaxDerivedPools); err != nil {
		t.Fatal(err)
	}
	err := CheckDerivedCount(MaxDerivedPools + 1)
	if want := "17 inline ranges would derive as many IPPools; one NAD may derive at most 16"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

func at(p ipamv1.IPPool, created int64) ipamv1.IPPool {
	p.CreationTimestamp = metav1.NewTime(time.Unix(created, 0))
	return p
}
