package poolstatus

import (
	"fmt"
	"math/big"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/ippool"
)

// poolVerdict is what the pool status reconciler found about one pool: the input of the pure
// set*Condition functions.
type poolVerdict struct {
	// invalid says why the spec cannot be served, naming the field and the value; empty when it can.
	invalid string
	// capacity is how many addresses the pool can hand out; nil when the spec does not parse.
	capacity *big.Int
	// allocated is how many reservations the pool holds.
	allocated int64
}

// free is capacity minus allocated, never below zero; nil when capacity is (the pool model's rule).
func (v poolVerdict) free() *big.Int {
	return ippool.Counts{Capacity: v.capacity, Allocated: v.allocated}.Free()
}

// usage is "N of M addresses free", for messages.
func (v poolVerdict) usage() string {
	return fmt.Sprintf("%s of %s addresses free (%d allocated)", v.free(), v.capacity, v.allocated)
}

// setInvalidCondition sets Invalid: True with the reason the spec cannot be served, else False.
func setInvalidCondition(p *ipamv1.IPPool, v poolVerdict) {
	c := metav1.Condition{
		Type:               ipamv1.IPPoolInvalidCondition,
		Status:             metav1.ConditionFalse,
		Reason:             ipamv1.IPPoolValidSpecReason,
		Message:            "The spec can be served",
		ObservedGeneration: p.Generation,
	}
	if v.invalid != "" {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ipamv1.IPPoolInvalidSpecReason, v.invalid
	}
	meta.SetStatusCondition(&p.Status.Conditions, c)
}

// setExhaustedCondition sets Exhausted: True when no address is free, False when one is, and
// Unknown when the spec does not parse (there is no capacity to compare with).
func setExhaustedCondition(p *ipamv1.IPPool, v poolVerdict) {
	c := metav1.Condition{
		Type:               ipamv1.IPPoolExhaustedCondition,
		ObservedGeneration: p.Generation,
	}
	switch {
	case v.capacity == nil:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, ipamv1.IPPoolInvalidSpecReason, v.invalid
	case v.free().Sign() == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ipamv1.IPPoolExhaustedReason, v.usage()
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ipamv1.IPPoolAddressesAvailableReason, v.usage()
	}
	meta.SetStatusCondition(&p.Status.Conditions, c)
}

// setReadyCondition sets Ready: True when the spec is valid and an address is free; False with
// InvalidSpec or PoolExhausted otherwise. An invalid spec wins over exhaustion.
func setReadyCondition(p *ipamv1.IPPool, v poolVerdict) {
	c := metav1.Condition{
		Type:               ipamv1.IPPoolReadyCondition,
		ObservedGeneration: p.Generation,
	}
	switch {
	case v.invalid != "":
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ipamv1.IPPoolInvalidSpecReason, v.invalid
	case v.free().Sign() == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ipamv1.IPPoolExhaustedReason, v.usage()
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ipamv1.IPPoolAvailableReason, v.usage()
	}
	meta.SetStatusCondition(&p.Status.Conditions, c)
}

// setCounts writes capacity, allocated and free as the pool model counts them; capacity and free
// are left empty when the spec does not parse.
func setCounts(p *ipamv1.IPPool, v poolVerdict) {
	var allocated int64
	p.Status.Capacity, allocated, p.Status.Free = ippool.Counts{Capacity: v.capacity, Allocated: v.allocated}.Status()
	p.Status.Allocated = &allocated
}

// applyVerdict writes the whole status from v: counts, the three conditions and
// observedGeneration.
func applyVerdict(p *ipamv1.IPPool, v poolVerdict) {
	setCounts(p, v)
	setInvalidCondition(p, v)
	setExhaustedCondition(p, v)
	setReadyCondition(p, v)
	p.Status.ObservedGeneration = p.Generation
}
