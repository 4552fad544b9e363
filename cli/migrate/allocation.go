package migrate

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/internal/gcpolicy"
	"github.com/netpool/netpool/internal/ippool"
	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/internal/reservation"
	"github.com/netpool/netpool/ipam"
)

// addAllocation plans the reservation of whereabouts allocation a of pp.
func (p *plan) addAllocation(ctx context.Context, pods *podCache, pp *poolPlan, a wbAllocation) error {
	e := Allocation{Address: a.Addr.String(), Pool: pp.want.Name, Whereabouts: pp.wb.allocationID(a.Key),
		Pod: a.PodRef, ContainerID: a.ContainerID, IfName: a.IfName}
	add := func(action Action, reason string) {
		e.Action, e.Reason = action, reason
		p.report.Allocations = append(p.report.Allocations, e)
	}
	if err := pp.rng.Allowed(a.Addr); err != nil {
		add(ActionSkipped, fmt.Sprintf("netpool never hands it out (%v): nothing to protect", err))
		return nil
	}
	ref, ok := splitPodRef(a.PodRef)
	if !ok {
		add(ActionInvalid, fmt.Sprintf("podref %q is not namespace/name", a.PodRef))
		return nil
	}
	pod, err := pods.get(ctx, ref)
	if err != nil {
		return err
	}
	node := ""
	if pod != nil {
		ref.UID, node = string(pod.UID), pod.Spec.NodeName
		e.PodUID, e.Node = ref.UID, node
	}
	network, reason := pp.networkOf(pod, a.IfName)
	if reason != "" && pod != nil {
		add(ActionInvalid, reason)
		return nil
	}
	e.Network = network
	al := &allocator.Allocation{Addr: a.Addr, Owner: allocator.Owner{ContainerID: a.ContainerID, IfName: a.IfName},
		Network: network, Pod: ref}
	scope := ippool.ReservationScope(pp.want.Name, pp.cfg.NetworkName, pp.overlap)
	want := reservation.New(node, pp.want.Name, scope, pp.cfg.NetworkName, al)
	// What the controller's GC would release at once is a whereabouts leak, not an attachment.
	if v := gcpolicy.Judge(want, gcpolicy.Facts{Pod: pod}, time.Now(), 0); v.Reason != "" {
		e.PodUID, e.Network = "", ""
		add(ActionSkipped, fmt.Sprintf("whereabouts leaked it: netpool's GC would release it at once (%s: %s)", v.Reason, v.Detail))
		return nil
	}
	if node == "" {
		add(ActionSkipped, fmt.Sprintf("pod %s is on no node: whereabouts leaked the address", a.PodRef))
		return nil
	}
	e.Reservation = want.Name
	if o := p.resByName[want.Name]; o != nil {
		add(ActionConflict, fmt.Sprintf("whereabouts also gave the address to %s (%s)", p.report.Allocations[o.entry].Pod, p.report.Allocations[o.entry].Whereabouts))
		return nil
	}
	add(ActionCreate, "")
	r := &resPlan{entry: len(p.report.Allocations) - 1, pool: pp, want: want, owner: al.Owner}
	p.res = append(p.res, r)
	p.resByName[want.Name] = r
	return nil
}

// networkOf is the CNI network name (the config's "name") of the attachment ifName of pod in pp:
// the one network that draws from the pool, or else the network whose NAD the pod's Multus
// network-status names for that interface. reason says why it cannot be told.
func (pp *poolPlan) networkOf(pod *corev1.Pod, ifName string) (string, string) {
	if len(pp.networks) == 1 {
		for n := range pp.networks {
			return n, ""
		}
	}
	if pod == nil {
		return "", "no pod"
	}
	var status []nadv1.NetworkStatus
	_ = json.Unmarshal([]byte(pod.Annotations[nadv1.NetworkStatusAnnot]), &status) // absent or malformed: no answer below
	for _, st := range status {
		if st.Interface != ifName {
			continue
		}
		for n, nads := range pp.networks {
			for _, nad := range nads {
				if nad == st.Name {
					return n, ""
				}
			}
		}
	}
	var ns []string
	for n := range pp.networks {
		ns = append(ns, fmt.Sprintf("%q (%s)", n, strings.Join(pp.networks[n], ", ")))
	}
	sort.Strings(ns)
	return "", fmt.Sprintf("NADs of networks %s share IPPool %s, and the pod's %s annotation does not say which attached %s",
		strings.Join(ns, ", "), pp.want.Name, nadv1.NetworkStatusAnnot, ifName)
}

// podCache reads each pod once.
type podCache struct {
	c    kubeclient.Reader
	pods map[string]*corev1.Pod
}

// get returns the pod, or nil when it does not exist.
func (pc *podCache) get(ctx context.Context, ref ipam.PodRef) (*corev1.Pod, error) {
	key := ref.Namespace + "/" + ref.Name
	if pod, ok := pc.pods[key]; ok {
		return pod, nil
	}
	pod := &corev1.Pod{}
	err := pc.c.Get(ctx, kubeclient.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, pod)
	switch {
	case apierrors.IsNotFound(err):
		pod = nil
	case err != nil:
		return nil, fmt.Errorf("failed to read pod %s: %w", key, err)
	}
	pc.pods[key] = pod
	return pod, nil
}
