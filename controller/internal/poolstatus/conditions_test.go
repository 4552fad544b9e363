package poolstatus

import (
	"math/big"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// condition is what a table expects of one condition.
type condition struct {
	status  metav1.ConditionStatus
	reason  string
	message string
}

func checkCondition(t *testing.T, p *ipamv1.IPPool, typ string, want condition) {
	t.Helper()
	c := meta.FindStatusCondition(p.Status.Conditions, typ)
	if c == nil {
		t.Fatalf("no %s condition", typ)
	}
	if c.Status != want.status || c.Reason != want.reason || c.Message != want.message || c.ObservedGeneration != p.Generation {
		t.Fatalf("%s = %s/%s %q (generation %d), want %s/%s %q (generation %d)",
			typ, c.Status, c.Reason, c.Message, c.ObservedGeneration, want.status, want.reason, want.message, p.Generation)
	}
}

var (
	validFree      = poolVerdict{capacity: big.NewInt(10), allocated: 4}
	validExhausted = poolVerdict{capacity: big.NewInt(10), allocated: 10}
	overCommitted  = poolVerdict{capacity: big.NewInt(2), allocated: 3}
	overlapping    = poolVerdict{capacity: big.NewInt(10), allocated: 4, invalid: "spec.range overlaps"}
	unparsable     = poolVerdict{allocated: 1, invalid: `spec.gateway "x": not an IP address`}
)

func TestSetInvalidCondition(t *testing.T) {
	tests := []struct {
		name string
		v    poolVerdict
		want condition
	}{
		{"valid", validFree, condition{metav1.ConditionFalse, ipamv1.IPPoolValidSpecReason, "The spec can be served"}},
		{"valid and exhausted", validExhausted, condition{metav1.ConditionFalse, ipamv1.IPPoolValidSpecReason, "The spec can be served"}},
		{"overlapping", overlapping, condition{metav1.ConditionTrue, ipamv1.IPPoolInvalidSpecReason, "spec.range overlaps"}},
		{"unparsable", unparsable, condition{metav1.ConditionTrue, ipamv1.IPPoolInvalidSpecReason, `spec.gateway "x": not an IP address`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			setInvalidCondition(p, tt.v)
			checkCondition(t, p, ipamv1.IPPoolInvalidCondition, tt.want)
		})
	}
}

func TestSetExhaustedCondition(t *testing.T) {
	tests := []struct {
		name string
		v    poolVerdict
		want condition
	}{
		{"addresses free", validFree, condition{metav1.ConditionFalse, ipamv1.IPPoolAddressesAvailableReason, "6 of 10 addresses free (4 allocated)"}},
		{"every address taken", validExhausted, condition{metav1.ConditionTrue, ipamv1.IPPoolExhaustedReason, "0 of 10 addresses free (10 allocated)"}},
		{"more reservations than capacity", overCommitted, condition{metav1.ConditionTrue, ipamv1.IPPoolExhaustedReason, "0 of 2 addresses free (3 allocated)"}},
		{"overlapping still counts", overlapping, condition{metav1.ConditionFalse, ipamv1.IPPoolAddressesAvailableReason, "6 of 10 addresses free (4 allocated)"}},
		{"unparsable has no capacity", unparsable, condition{metav1.ConditionUnknown, ipamv1.IPPoolInvalidSpecReason, `spec.gateway "x": not an IP address`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
			setExhaustedCondition(p, tt.v)
			checkCondition(t, p, ipamv1.IPPoolExhaustedCondition, tt.want)
		})
	}
}

func TestSetReadyCondition(t *testing.T) {
	tests := []struct {
		name string
		v    poolVerdict
		want condition
	}{
		{"available", validFree, condition{metav1.ConditionTrue, ipamv1.IPPoolAvailableReason, "6 of 10 addresses free (4 allocated)"}},
		{"exhausted", validExhausted, condition{metav1.ConditionFalse, ipamv1.IPPoolExhaustedReason, "0 of 10 addresses free (10 allocated)"}},
		{"invalid wins over free addresses", overlapping, condition{metav1.ConditionFalse, ipamv1.IPPoolInvalidSpecReason, "spec.range overlaps"}},
		{"unparsable", unparsable, condition{metav1.ConditionFalse, ipamv1.IPPoolInvalidSpecReason, `spec.gateway "x": not an IP address`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Generation: 5}}
			setReadyCondition(p, tt.v)
			checkCondition(t, p, ipamv1.IPPoolReadyCondition, tt.want)
		})
	}
}

func TestSetConditionKeepsTheTransitionTimeWhileTheStatusHolds(t *testing.T) {
	p := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	setReadyCondition(p, validFree)
	then := metav1.NewTime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	p.Status.Conditions[0].LastTransitionTime = then
	setReadyCondition(p, poolVerdict{capacity: big.NewInt(10), allocated: 5})
	if c := meta.FindStatusCondition(p.Status.Conditions, ipamv1.IPPoolReadyCondition); !c.LastTransitionTime.Equal(&then) {
		t.Fatalf("a new message moved lastTransitionTime to %s", c.LastTransitionTime)
	}
	setReadyCondition(p, validExhausted)
	if c := meta.FindStatusCondition(p.Status.Conditions, ipamv1.IPPoolReadyCondition); c.LastTransitionTime.Equal(&then) {
		t.Fatal("a status change kept the old lastTransitionTime")
	}
}

func TestApplyVerdictWritesCountsAndGeneration(t *testing.T) {
	tests := []struct {
		name                   string
		v                      poolVerdict
		capacity, free         string
		allocated, observedGen int64
	}{
		{"valid", validFree, "10", "6", 4, 7},
		{"over-committed frees nothing", overCommitted, "2", "0", 3, 7},
		{"IPv6 beyond int64", poolVerdict{capacity: new(big.Int).Lsh(big.NewInt(1), 64), allocated: 1}, "18446744073709551616", "18446744073709551615", 1, 7},
		{"unparsable leaves capacity and free empty", unparsable, "", "", 1, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &ipamv1.IPPool{ObjectMeta: metav1.ObjectMeta{Generation: 7}}
			p.Status.Capacity, p.Status.Free = "stale", "stale"
			applyVerdict(p, tt.v)
			s := p.Status
			if s.Capacity != tt.capacity || s.Free != tt.free || s.Allocated == nil || *s.Allocated != tt.allocated || s.ObservedGeneration != tt.observedGen {
				t.Fatalf("status %+v", s)
			}
			if len(s.Conditions) != 3 {
				t.Fatalf("%d conditions, want 3", len(s.Conditions))
			}
		})
	}
}

func TestFreeWithoutCapacityIsUnknown(t *testing.T) {
	if f := unparsable.free(); f != nil {
		t.Fatalf("free of an unparsable pool = %s, want nil", f)
	}
}
