package kubestore

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/allocator"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/podowner"
	"github.com/netpool/netpool/ipam"
)

// The condition netpool writes on an IPAMClaim it allocated for, with the type and reason
// OVN-Kubernetes writes, so that tools reading claims see one vocabulary.
const (
	ClaimAllocatedCondition = "IPsAllocated"
	ClaimAllocatedReason    = "SuccessfulAllocation"
)

// claimUse is one call's persistent owner, resolved once per call: the IPAMClaim the attachment's
// network selection element references, or the StatefulSet pod identity of a sticky pool.
type claimUse struct {
	owner ipamv1.ReservationOwner
	claim *ipamclaimsv1.IPAMClaim // nil for a StatefulSet owner, which has no status to write
	pod   string                  // the pod's name, the claim's status.ownerPod
	// hints are the addresses the claim's status lists: where its reservations are, when this
	// node does not hold them.
	hints []netip.Addr
	// bound are the addresses this call bound or claimed for the owner, by allocator pool key,
	// with the prefix length of their range.
	bound map[string]netip.Prefix
}

// resolvePersistent finds the persistent owner of attachment owner in config c: it reads the pod
// (live, since its annotation and owner are what the call is about), then, when c allows
// persistent IPs, the IPAMClaim its network selection element references, and otherwise, when the
// call's pools are sticky, the StatefulSet that controls it. No owner: nil. Every refusal names the
// pod or claim and why.
func (s *Store) resolvePersistent(ctx context.Context, c *ipam.Config, owner allocator.Owner, sticky bool) (*claimUse, error) {
	if !c.AllowPersistentIPs && !sticky {
		return nil, nil
	}
	if c.Pod.Namespace == "" || c.Pod.Name == "" {
		return nil, nil // no pod identity in CNI_ARGS: no annotation or owner to read
	}
	podKey := client.ObjectKey{Namespace: c.Pod.Namespace, Name: c.Pod.Name}
	pod := &corev1.Pod{}
	err := s.retry(ctx, "read pod "+podKey.String(), func(ctx context.Context) error { return s.live.Get(ctx, podKey, pod) })
	if apierrors.IsNotFound(err) {
		what := "its IPAMClaim (allowPersistentIPs)"
		if !c.AllowPersistentIPs {
			what = "its StatefulSet (statefulSets: Sticky)"
		}
		return nil, fmt.Errorf("%w: pod %s does not exist, so %s cannot be read", allocator.ErrPersistentOwnerNotFound, podKey, what)
	}
	if err != nil {
		return nil, apiFailure("read pod "+podKey.String(), err)
	}
	if c.Pod.UID != "" && string(pod.UID) != c.Pod.UID {
		return nil, fmt.Errorf("%w: pod %s has UID %s, not the %s of this attachment", allocator.ErrStoreBusy, podKey, pod.UID, c.Pod.UID)
	}
	if c.AllowPersistentIPs {
		u, err := s.resolveClaim(ctx, c, owner, pod)
		if err != nil || u != nil || !sticky {
			return u, err
		}
	}
	return statefulSetUse(pod, owner)
}

// resolveClaim finds the IPAMClaim that the network selection element of attachment owner in pod
// references, and reads it. No reference: nil.
func (s *Store) resolveClaim(ctx context.Context, c *ipam.Config, owner allocator.Owner, pod *corev1.Pod) (*claimUse, error) {
	podKey := client.ObjectKeyFromObject(pod)
	el, found, err := podowner.AttachmentElement(pod.Annotations[podowner.NetworksAnnotation], owner.IfName)
	if err != nil {
		return nil, fmt.Errorf("%w: pod %s: %w", allocator.ErrPersistentOwnerInvalid, podKey, err)
	}
	if !found || el.ClaimRef == "" {
		return nil, nil
	}
	if msgs := validation.IsDNS1123Subdomain(el.ClaimRef); len(msgs) > 0 {
		return nil, fmt.Errorf("%w: interface %s of pod %s references IPAMClaim %q, which is not a valid object name: %s (a claim is read from the pod's own namespace)",
			allocator.ErrPersistentOwnerInvalid, owner.IfName, podKey, podowner.Truncate(el.ClaimRef, 64), strings.Join(msgs, "; "))
	}
	ref := client.ObjectKey{Namespace: c.Pod.Namespace, Name: el.ClaimRef}
	if len(c.Requested) > 0 || len(el.IPs) > 0 {
		return nil, fmt.Errorf("%w: interface %s of pod %s references IPAMClaim %s and requests ips: the claim owns the addresses, so the two cannot be combined",
			allocator.ErrPersistentOwnerInvalid, owner.IfName, podKey, ref)
	}
	claim := &ipamclaimsv1.IPAMClaim{}
	err = s.retry(ctx, "read IPAMClaim "+ref.String(), func(ctx context.Context) error { return s.live.Get(ctx, ref, claim) })
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: IPAMClaim %s, referenced by interface %s of pod %s, does not exist",
			allocator.ErrPersistentOwnerNotFound, ref, owner.IfName, podKey)
	}
	if err != nil {
		return nil, apiFailure("read IPAMClaim "+ref.String(), err)
	}
	if claim.DeletionTimestamp != nil {
		return nil, fmt.Errorf("%w: IPAMClaim %s is being deleted", allocator.ErrPersistentOwnerNotFound, ref)
	}
	if claim.Spec.Network != c.Name {
		return nil, fmt.Errorf("%w: IPAMClaim %s is for network %q, not for this attachment's network %q",
			allocator.ErrPersistentOwnerInvalid, ref, claim.Spec.Network, c.Name)
	}
	if err := claimForAttachment(claim, ref, el, owner.IfName, podKey); err != nil {
		return nil, err
	}
	u := &claimUse{
		owner: ipamv1.ReservationOwner{Kind: ipamv1.OwnerIPAMClaim, Namespace: ref.Namespace, Name: ref.Name, UID: string(claim.UID)},
		claim: claim, pod: pod.Name, bound: map[string]netip.Prefix{},
	}
	for _, text := range claim.Status.IPs {
		text, _, _ = strings.Cut(strings.TrimSpace(text), "/")
		if a, err := netip.ParseAddr(text); err == nil {
			u.hints = append(u.hints, a.Unmap())
		}
	}
	return u, nil
}

// claimForAttachment checks that claim, referenced by the network selection element el of pod,
// is this attachment's (interface ifName). A claim naming an interface is for that interface only.
// A claim without one (KubeVirt's ipam-extensions writes only spec.network) is for the attachment
// whose element references it: the element found by interface, of the network spec.network names
// (checked before), so it may be referenced by that one element of the pod, not by two.
func claimForAttachment(claim *ipamclaimsv1.IPAMClaim, ref client.ObjectKey, el podowner.Element, ifName string, pod client.ObjectKey) error {
	if claim.Spec.Interface == "" {
		if el.ClaimRefs > 1 {
			return fmt.Errorf("%w: IPAMClaim %s has no interface and %d network selection elements of pod %s reference it: such a claim belongs to one attachment",
				allocator.ErrPersistentOwnerInvalid, ref, el.ClaimRefs, pod)
		}
		return nil
	}
	if claim.Spec.Interface != ifName {
		return fmt.Errorf("%w: IPAMClaim %s is for interface %q, not for this attachment's interface %q",
			allocator.ErrPersistentOwnerInvalid, ref, claim.Spec.Interface, ifName)
	}
	return nil
}

// writeClaimStatus records in the claim what this call bound: its addresses, the pod, and the
// IPsAllocated condition. It writes only what changed, so a repeated ADD of the same pod costs
// no write.
func (s *Store) writeClaimStatus(ctx context.Context, u *claimUse) error {
	var ips []string
	for _, p := range u.bound {
		ips = append(ips, p.String())
	}
	slices.Sort(ips)
	claim := u.claim.DeepCopy()
	for attempt := 0; ; attempt++ {
		sorted := slices.Sorted(slices.Values(claim.Status.IPs))
		cond := meta.FindStatusCondition(claim.Status.Conditions, ClaimAllocatedCondition)
		if slices.Equal(sorted, ips) && claim.Status.OwnerPod != nil && claim.Status.OwnerPod.Name == u.pod &&
			cond != nil && cond.Status == metav1.ConditionTrue {
			return nil
		}
		claim.Status.IPs = ips
		claim.Status.OwnerPod = &ipamclaimsv1.OwnerPod{Name: u.pod}
		meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{
			Type: ClaimAllocatedCondition, Status: metav1.ConditionTrue, Reason: ClaimAllocatedReason,
			Message: fmt.Sprintf("netpool bound %s to pod %s", strings.Join(ips, ", "), u.pod),
		})
		key := client.ObjectKeyFromObject(claim)
		err := s.retry(ctx, "update status of IPAMClaim "+key.String(), func(ctx context.Context) error {
			return s.client.Status().Update(ctx, claim.DeepCopy())
		})
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == 2 {
			return apiFailure("update status of IPAMClaim "+key.String(), err)
		}
		claim = &ipamclaimsv1.IPAMClaim{}
		if err := s.retry(ctx, "read IPAMClaim "+key.String(), func(ctx context.Context) error { return s.live.Get(ctx, key, claim) }); err != nil {
			return apiFailure("read IPAMClaim "+key.String(), err)
		}
	}
}
