package poolstatus

import (
	"context"
	"errors"
	"strings"
	"testing"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// failingInformers stands in for the manager's cache where it cannot hand out the Node informer,
// or hands out one that refuses a handler: the two ways countNodes can fail before the manager
// starts. Only GetInformer is called; the embedded nil interface makes any other call panic, which
// would show that countNodes reached for more than it needs.
type failingInformers struct {
	cache.Informers
	getErr     error
	handlerErr error
}

func (f failingInformers) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	if f.getErr != nil {
		return nil, f.getErr
	}
	return refusingInformer{err: f.handlerErr}, nil
}

type refusingInformer struct {
	cache.Informer
	err error
}

func (r refusingInformer) AddEventHandler(toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return nil, r.err
}

func TestCountNodesFailures(t *testing.T) {
	tests := []struct {
		name      string
		informers failingInformers
		want      string
	}{
		{"no Node informer", failingInformers{getErr: errors.New("no kind Node is registered")},
			"pool status: the Node informer: no kind Node is registered"},
		{"handler refused", failingInformers{handlerErr: errors.New("informer has already stopped")},
			"pool status: counting Nodes: informer has already stopped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := countNodes(context.Background(), tt.informers)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("countNodes: %v, want an error containing %q", err, tt.want)
			}
			if c != nil {
				t.Fatalf("countNodes returned a counter (%d) beside its error", c.count())
			}
		})
	}
}
