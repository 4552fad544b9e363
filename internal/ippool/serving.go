package ippool

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
)

// Serving returns why p must not hand out addresses now, or nil: the controller's verdict, as the
// agent obeys it. A pool whose Ready condition is False is refused, naming the reason and the
// message, except when the reason is PoolExhausted: the allocator finds exhaustion itself, live,
// and a release must not wait for the controller to notice it. A pool with no Ready condition yet
// (a derived pool created a moment ago) serves: the agent applies the rules of Governing itself.
func Serving(p *ipamv1.IPPool) error {
	c := meta.FindStatusCondition(p.Status.Conditions, ipamv1.IPPoolReadyCondition)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason == ipamv1.IPPoolExhaustedReason {
		return nil
	}
	return fmt.Errorf("IPPool %s is not Ready (%s): %s", p.Name, c.Reason, c.Message)
}
