package kubeclient

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// The client interfaces are the subset of controller-runtime's client that the shared policy
// (internal/gcpolicy) and netpoolctl use, with options of their own: controller-runtime's client
// package links its metrics, and through them client-go's leader election, informers and
// clientset (about 350 packages), which an admin command does not need. The daemons, which run
// controller-runtime anyway, adapt their clients with package crclient.

// Object is a Kubernetes object: controller-runtime's client.Object has the same methods, so
// every object of the scheme is one.
type Object interface {
	metav1.Object
	runtime.Object
}

// ObjectList is a list of Kubernetes objects.
type ObjectList interface {
	metav1.ListInterface
	runtime.Object
}

// ObjectKey names an object: a namespace ("" for a cluster-scoped kind) and a name.
type ObjectKey = types.NamespacedName

// Reader reads objects.
type Reader interface {
	// Get reads the object key names into obj, whose kind says what to read.
	Get(ctx context.Context, key ObjectKey, obj Object) error
	// List reads the objects opts select into list, whose kind says what to list.
	List(ctx context.Context, list ObjectList, opts ...ListOption) error
}

// Writer writes objects.
type Writer interface {
	Create(ctx context.Context, obj Object, opts ...CreateOption) error
	Update(ctx context.Context, obj Object) error
	Patch(ctx context.Context, obj Object, patch Patch) error
	Delete(ctx context.Context, obj Object, opts ...DeleteOption) error
}

// Client reads and writes objects.
type Client interface {
	Reader
	Writer
}

// WithWatch is a Client that also watches, for informers.
type WithWatch interface {
	Client
	Watch(ctx context.Context, list ObjectList, opts ...ListOption) (watch.Interface, error)
}

// ListOptions select the objects of a list.
type ListOptions struct {
	// Namespace is the namespace to list in, "" for every namespace.
	Namespace     string
	LabelSelector labels.Selector
	FieldSelector fields.Selector
	// Limit and Continue page the list.
	Limit    int64
	Continue string
	// Raw, when set, is sent as it is under the fields above (an informer's list and watch).
	Raw *metav1.ListOptions
}

// ListOption is one option of a list.
type ListOption interface{ ApplyToList(*ListOptions) }

// ApplyToList makes ListOptions an option: its set fields replace those of l.
func (o *ListOptions) ApplyToList(l *ListOptions) {
	if o.Namespace != "" {
		l.Namespace = o.Namespace
	}
	if o.LabelSelector != nil {
		l.LabelSelector = o.LabelSelector
	}
	if o.FieldSelector != nil {
		l.FieldSelector = o.FieldSelector
	}
	if o.Limit != 0 {
		l.Limit = o.Limit
	}
	if o.Continue != "" {
		l.Continue = o.Continue
	}
	if o.Raw != nil {
		l.Raw = o.Raw
	}
}

// NewListOptions applies opts in order.
func NewListOptions(opts []ListOption) *ListOptions {
	l := &ListOptions{}
	for _, o := range opts {
		o.ApplyToList(l)
	}
	return l
}

// AsListOptions is l as the API's query parameters.
func (o *ListOptions) AsListOptions() *metav1.ListOptions {
	l := &metav1.ListOptions{}
	if o.Raw != nil {
		o.Raw.DeepCopyInto(l)
	}
	if o.LabelSelector != nil {
		l.LabelSelector = o.LabelSelector.String()
	}
	if o.FieldSelector != nil {
		l.FieldSelector = o.FieldSelector.String()
	}
	if o.Limit != 0 {
		l.Limit = o.Limit
	}
	if o.Continue != "" {
		l.Continue = o.Continue
	}
	return l
}

// InNamespace lists in one namespace ("" is every namespace).
type InNamespace string

func (n InNamespace) ApplyToList(l *ListOptions) { l.Namespace = string(n) }

// MatchingLabels selects the objects that carry every one of these labels.
type MatchingLabels map[string]string

func (m MatchingLabels) ApplyToList(l *ListOptions) {
	l.LabelSelector = labels.SelectorFromSet(labels.Set(m))
}

// MatchingFields selects the objects whose fields have these values (the API server's selectable
// fields).
type MatchingFields map[string]string

func (m MatchingFields) ApplyToList(l *ListOptions) {
	l.FieldSelector = fields.SelectorFromSet(fields.Set(m))
}

// Limit asks for at most this many objects per page.
type Limit int64

func (n Limit) ApplyToList(l *ListOptions) { l.Limit = int64(n) }

// Continue asks for the page after the one that returned this continue token.
type Continue string

func (c Continue) ApplyToList(l *ListOptions) { l.Continue = string(c) }

// CreateOption is one option of a create.
type CreateOption interface{ ApplyToCreate(*metav1.CreateOptions) }

// DeleteOption is one option of a delete.
type DeleteOption interface{ ApplyToDelete(*metav1.DeleteOptions) }

// DryRunAll asks the API server to check a write and keep nothing.
var DryRunAll dryRunAll

type dryRunAll struct{}

func (dryRunAll) ApplyToCreate(o *metav1.CreateOptions) { o.DryRun = []string{metav1.DryRunAll} }
func (dryRunAll) ApplyToDelete(o *metav1.DeleteOptions) { o.DryRun = []string{metav1.DryRunAll} }

// Preconditions make a delete fail (Conflict) unless the object still has this UID and
// resourceVersion.
type Preconditions metav1.Preconditions

func (p Preconditions) ApplyToDelete(o *metav1.DeleteOptions) {
	pre := metav1.Preconditions(p)
	o.Preconditions = &pre
}

// GracePeriodSeconds is the delete's grace period.
type GracePeriodSeconds int64

func (s GracePeriodSeconds) ApplyToDelete(o *metav1.DeleteOptions) {
	n := int64(s)
	o.GracePeriodSeconds = &n
}

// Patch is a patch of an object: its type and its body.
type Patch struct {
	Type types.PatchType
	Data []byte
}

// RawPatch is a patch of type pt with body data.
func RawPatch(pt types.PatchType, data []byte) Patch { return Patch{Type: pt, Data: data} }
