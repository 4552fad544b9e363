package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/netpool/netpool/internal/kubeclient"
)

// ErrWhereaboutsNotInstalled is returned when the API server does not serve whereabouts' kinds.
var ErrWhereaboutsNotInstalled = errors.New("whereabouts is not installed")

// listPageSize is how many objects one list request returns.
const listPageSize = 500

// state is what the cluster holds of whereabouts: NADs (of the namespace, or all), and
// whereabouts' pools and reservations (of every namespace: whereabouts keeps them in the
// namespace of its kubeconfig's context, kube-system by default).
type state struct {
	nads         []nadv1.NetworkAttachmentDefinition
	pools        []*wbPool
	reservations []wbReservation
	// unreadable are whereabouts IPPools whose range cannot be read.
	unreadable []unreadablePool
}

type unreadablePool struct {
	namespace, name, reason string
}

func read(ctx context.Context, c kubeclient.Reader, namespace string) (*state, error) {
	s := &state{}
	nads := &nadv1.NetworkAttachmentDefinitionList{}
	if err := c.List(ctx, nads, kubeclient.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("failed to list NetworkAttachmentDefinitions: %w", err)
	}
	s.nads = nads.Items
	err := listEach(ctx, c, wbPoolList, func(data []byte, ns, name string) {
		p, err := parsePool(data)
		if err != nil {
			s.unreadable = append(s.unreadable, unreadablePool{ns, name, err.Error()})
			return
		}
		s.pools = append(s.pools, p)
	})
	if err != nil {
		return nil, err
	}
	err = listEach(ctx, c, wbReservationList, func(data []byte, ns, name string) {
		if r, err := parseReservation(data); err == nil {
			s.reservations = append(s.reservations, r)
		}
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// listEach lists every object of a whereabouts kind, page by page, and hands each one's JSON to fn.
func listEach(ctx context.Context, c kubeclient.Reader, gvk schema.GroupVersionKind, fn func(data []byte, ns, name string)) error {
	cont := ""
	for {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk)
		err := c.List(ctx, l, kubeclient.Limit(listPageSize), kubeclient.Continue(cont))
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: the API server does not serve %s.%s (%v)", ErrWhereaboutsNotInstalled, gvk.Kind[:len(gvk.Kind)-len("List")], gvk.Group, err)
		}
		if err != nil {
			return fmt.Errorf("failed to list whereabouts %s: %w", gvk.Kind, err)
		}
		for i := range l.Items {
			data, err := json.Marshal(l.Items[i].Object)
			if err != nil {
				return err
			}
			fn(data, l.Items[i].GetNamespace(), l.Items[i].GetName())
		}
		if cont = l.GetContinue(); cont == "" {
			return nil
		}
	}
}
