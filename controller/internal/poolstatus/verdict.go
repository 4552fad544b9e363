package poolstatus

import (
	"fmt"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/ippool"
)

// judgePool works out a pool's verdict from its spec, the other pools of its network (peers, which
// may include p itself) and its reservation count. The spec is parsed by the pool model with the
// plugin's own range code, so the capacity is exactly what the allocator can hand out, and the
// overlap rule is the one the agent obeys.
func judgePool(p *ipamv1.IPPool, peers []ipamv1.IPPool, allocated int64) poolVerdict {
	v := poolVerdict{allocated: allocated}
	parsed, err := ippool.Parse(p)
	if err != nil {
		v.invalid = err.Error()
		return v
	}
	r := parsed.Range
	v.capacity = parsed.Capacity()
	if v.capacity.Sign() == 0 {
		v.invalid = fmt.Sprintf("no usable address: the window %s-%s of range %s is entirely excluded", r.Start, r.End, p.Spec.Range)
		return v
	}
	v.invalid = ippool.OverlapText(parsed, peers)
	return v
}
