// Package crclient adapts controller-runtime's clients to kubeclient's interfaces, for the daemons
// (which run controller-runtime) to call the shared policy that netpoolctl also calls. It is the
// one place the two meet, so netpoolctl, which imports kubeclient, links no controller-runtime.
package crclient

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/internal/kubeclient"
)

// Reader is c as a kubeclient.Reader.
func Reader(c client.Reader) kubeclient.Reader { return reader{c} }

// Writer is c as a kubeclient.Writer.
func Writer(c client.Writer) kubeclient.Writer { return writer{c} }

// Client is c as a kubeclient.Client.
func Client(c client.Client) kubeclient.Client { return both{reader{c}, writer{c}} }

type reader struct{ c client.Reader }

func (r reader) Get(ctx context.Context, key kubeclient.ObjectKey, obj kubeclient.Object) error {
	return r.c.Get(ctx, key, obj)
}

func (r reader) List(ctx context.Context, list kubeclient.ObjectList, opts ...kubeclient.ListOption) error {
	return r.c.List(ctx, list, ListOptions(kubeclient.NewListOptions(opts)))
}

// ListOptions is o as controller-runtime's list options (which a cache reads, where it ignores
// raw query parameters).
func ListOptions(o *kubeclient.ListOptions) *client.ListOptions {
	return &client.ListOptions{Namespace: o.Namespace, LabelSelector: o.LabelSelector, FieldSelector: o.FieldSelector,
		Limit: o.Limit, Continue: o.Continue, Raw: o.Raw}
}

type writer struct{ c client.Writer }

func (w writer) Create(ctx context.Context, obj kubeclient.Object, opts ...kubeclient.CreateOption) error {
	co := &metav1.CreateOptions{}
	for _, o := range opts {
		o.ApplyToCreate(co)
	}
	return w.c.Create(ctx, obj, &client.CreateOptions{Raw: co, DryRun: co.DryRun})
}

func (w writer) Update(ctx context.Context, obj kubeclient.Object) error { return w.c.Update(ctx, obj) }

func (w writer) Patch(ctx context.Context, obj kubeclient.Object, p kubeclient.Patch) error {
	return w.c.Patch(ctx, obj, client.RawPatch(p.Type, p.Data))
}

func (w writer) Delete(ctx context.Context, obj kubeclient.Object, opts ...kubeclient.DeleteOption) error {
	do := &metav1.DeleteOptions{}
	for _, o := range opts {
		o.ApplyToDelete(do)
	}
	return w.c.Delete(ctx, obj, &client.DeleteOptions{Raw: do, GracePeriodSeconds: do.GracePeriodSeconds,
		Preconditions: do.Preconditions, PropagationPolicy: do.PropagationPolicy, DryRun: do.DryRun})
}

type both struct {
	reader
	writer
}
