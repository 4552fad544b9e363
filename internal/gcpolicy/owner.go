package gcpolicy

import (
	"context"
	"fmt"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/kubeclient"
)

// ownerFacts reads whether a reservation's persistent owner still owns it, and if not, why. A
// claim being deleted still exists: its address goes once it is gone. A claim of the name that
// has another UID than the one recorded was made again, and is another claim. A StatefulSet owns
// an ordinal's address while it exists (being deleted or not: its pods are still going) and its
// spec.replicas (1 when unset) is above the ordinal.
func ownerFacts(ctx context.Context, c kubeclient.Reader, o ipamv1.ReservationOwner) (Facts, error) {
	key := kubeclient.ObjectKey{Namespace: o.Namespace, Name: o.Name}
	switch o.Kind {
	case ipamv1.OwnerIPAMClaim:
		claim := &ipamclaimsv1.IPAMClaim{}
		err := c.Get(ctx, key, claim)
		if apierrors.IsNotFound(err) {
			return Facts{OwnerDetail: fmt.Sprintf("IPAMClaim %s no longer exists", key)}, nil
		}
		if err != nil {
			return Facts{}, fmt.Errorf("failed to get IPAMClaim %s: %w", key, err)
		}
		if o.UID != "" && string(claim.UID) != o.UID {
			return Facts{OwnerDetail: fmt.Sprintf("IPAMClaim %s was deleted and made again (UID %s; the address was claim UID %s's)",
				key, claim.UID, o.UID)}, nil
		}
		return Facts{OwnerExists: true, OwnerDetail: fmt.Sprintf("IPAMClaim %s exists", key)}, nil
	case ipamv1.OwnerStatefulSet:
		sts := &appsv1.StatefulSet{}
		err := c.Get(ctx, key, sts)
		if apierrors.IsNotFound(err) {
			return Facts{OwnerDetail: fmt.Sprintf("StatefulSet %s no longer exists", key)}, nil
		}
		if err != nil {
			return Facts{}, fmt.Errorf("failed to get StatefulSet %s: %w", key, err)
		}
		replicas := int32(1)
		if sts.Spec.Replicas != nil {
			replicas = *sts.Spec.Replicas
		}
		if o.Ordinal == nil || replicas > *o.Ordinal {
			return Facts{OwnerExists: true, OwnerDetail: fmt.Sprintf("StatefulSet %s has %d replicas", key, replicas)}, nil
		}
		return Facts{OwnerScaledDown: true, OwnerDetail: fmt.Sprintf("StatefulSet %s has %d replicas, so ordinal %d is gone",
			key, replicas, *o.Ordinal)}, nil
	}
	// An owner of a kind this version does not know is kept: releasing it could free a live address.
	return Facts{OwnerExists: true, OwnerDetail: fmt.Sprintf("owner %s is of a kind this version does not know", o.ObjectKey())}, nil
}
