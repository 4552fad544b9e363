package cli

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/netpool/netpool/cli/inventory"
	ipamv1 "github.com/netpool/netpool/crds/ipam/v1alpha1"
	"github.com/netpool/netpool/internal/kubeclient"
	"github.com/netpool/netpool/internal/scheme"
)

// watchClient is a client of the cluster that can watch, for the informers of --watch.
func (o *options) watchClient() (kubeclient.WithWatch, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	// A watch is one long request: the request timeout bounds each list, the server the watch.
	cfg.Timeout = 0
	sch, err := scheme.New()
	if err != nil {
		return nil, err
	}
	c, err := kubeclient.New(cfg, sch)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// informed is one kind an informer keeps: its list type and the API server's selection of it.
type informed struct {
	list     func() kubeclient.ObjectList
	object   runtime.Object
	selector fields.Selector
}

// startInformers starts an informer of the IPPools, of the reservations (of scope's pool only,
// selected by the API server) and, if scope asks, of the IPPoolSlices; it returns a source that
// reads their stores, and a channel that receives when any of them changes. They stop with ctx.
// An informer that has not listed within timeout is an error.
func startInformers(ctx context.Context, c kubeclient.WithWatch, scope watchScope, timeout time.Duration) (inventory.Source, <-chan struct{}, error) {
	kinds := []informed{
		{list: func() kubeclient.ObjectList { return &ipamv1.IPPoolList{} }, object: &ipamv1.IPPool{}, selector: fields.Everything()},
		{list: func() kubeclient.ObjectList { return &ipamv1.OverlappingRangeIPReservationList{} }, object: &ipamv1.OverlappingRangeIPReservation{}, selector: fields.Everything()},
	}
	if scope.pool != "" {
		kinds[1].selector = fields.OneTermEqualSelector("spec.pool", scope.pool)
	}
	if scope.slices {
		kinds = append(kinds, informed{list: func() kubeclient.ObjectList { return &ipamv1.IPPoolSliceList{} }, object: &ipamv1.IPPoolSlice{}, selector: fields.Everything()})
	}
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
	sc := &storeClient{Client: c, stores: map[string]cache.Store{}}
	var synced []cache.InformerSynced
	for _, k := range kinds {
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.FieldSelector = k.selector.String()
				list := k.list()
				err := c.List(ctx, list, &kubeclient.ListOptions{Raw: &o})
				return list, err
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.FieldSelector = k.selector.String()
				return c.Watch(ctx, k.list(), &kubeclient.ListOptions{Raw: &o})
			},
		}
		store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{ListerWatcher: lw, ObjectType: k.object, Handler: handler})
		sc.stores[fmt.Sprintf("%T", k.list())] = store
		go ctrl.RunWithContext(ctx)
		synced = append(synced, ctrl.HasSynced)
	}
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), synced...) {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, fmt.Errorf("the watch did not list the pools and reservations within --request-timeout %s", timeout)
	}
	// The first listing is printed from the synced stores; the events that filled them are not
	// changes to print again.
	select {
	case <-changed:
	default:
	}
	return &inventory.Cluster{Client: sc, Now: time.Now, LiveCounts: true}, changed, nil
}

// storeClient answers the lists of the kinds its informers keep from their stores, whole (no
// pages), and everything else from the cluster.
type storeClient struct {
	kubeclient.Client
	stores map[string]cache.Store
}

func (s *storeClient) List(ctx context.Context, list kubeclient.ObjectList, opts ...kubeclient.ListOption) error {
	store, ok := s.stores[fmt.Sprintf("%T", list)]
	if !ok {
		return s.Client.List(ctx, list, opts...)
	}
	objs := store.List()
	switch l := list.(type) {
	case *ipamv1.IPPoolList:
		l.Items = make([]ipamv1.IPPool, 0, len(objs))
		for _, o := range objs {
			l.Items = append(l.Items, *o.(*ipamv1.IPPool))
		}
	case *ipamv1.OverlappingRangeIPReservationList:
		l.Items = make([]ipamv1.OverlappingRangeIPReservation, 0, len(objs))
		for _, o := range objs {
			l.Items = append(l.Items, *o.(*ipamv1.OverlappingRangeIPReservation))
		}
	case *ipamv1.IPPoolSliceList:
		l.Items = make([]ipamv1.IPPoolSlice, 0, len(objs))
		for _, o := range objs {
			l.Items = append(l.Items, *o.(*ipamv1.IPPoolSlice))
		}
	default:
		return fmt.Errorf("no informer keeps %T", list)
	}
	return nil
}
