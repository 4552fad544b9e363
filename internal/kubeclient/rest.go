package kubeclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// REST is a Client of an API server over client-go's REST client, for the kinds of a scheme and
// unstructured objects of any kind. It maps a kind to its resource without discovery (one request
// fewer per group, which a CLI's start pays on every run): the resource is the kind's lower-case
// plural, except where resources says otherwise, so it serves only kinds whose resources follow
// that rule or are listed there. Discovery is asked only after a NotFound, to tell a kind the API
// server does not serve (meta.NoKindMatchError, as from a discovery-mapped client) from an object
// that does not exist.
type REST struct {
	cfg    *rest.Config
	http   *http.Client
	scheme *runtime.Scheme
	codecs runtime.NegotiatedSerializer

	mu      sync.Mutex
	clients map[schema.GroupVersion]*rest.RESTClient
	// served are the kinds discovery showed served, after a NotFound (notServed).
	served map[schema.GroupVersionKind]bool
}

var _ WithWatch = &REST{}

// resources are the resources of the kinds whose plural is not their kind's lower-case plural.
var resources = map[schema.GroupKind]string{
	{Group: "k8s.cni.cncf.io", Kind: "NetworkAttachmentDefinition"}: "network-attachment-definitions",
}

// New returns a client of the API server of cfg for the kinds of s.
func New(cfg *rest.Config, s *runtime.Scheme) (*REST, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to make an HTTP client of %s: %w", cfg.Host, err)
	}
	return &REST{
		cfg: rest.CopyConfig(cfg), http: hc, scheme: s,
		codecs:  serializer.NewCodecFactory(s).WithoutConversion(),
		clients: map[schema.GroupVersion]*rest.RESTClient{},
		served:  map[schema.GroupVersionKind]bool{},
	}, nil
}

// protobufGroups are the built-in groups the client reads as protobuf, which the API server
// encodes and the client decodes faster than JSON (a list of every pod); custom resources are
// served as JSON only.
var protobufGroups = map[string]bool{"": true, "apps": true}

// clientFor is the REST client of gv, made once.
func (c *REST) clientFor(gv schema.GroupVersion) (*rest.RESTClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rc, ok := c.clients[gv]; ok {
		return rc, nil
	}
	cfg := rest.CopyConfig(c.cfg)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.NegotiatedSerializer = c.codecs
	if cfg.ContentType == "" && protobufGroups[gv.Group] {
		cfg.ContentType = runtime.ContentTypeProtobuf
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientForConfigAndClient(cfg, c.http)
	if err != nil {
		return nil, fmt.Errorf("failed to make a client of %s: %w", gv, err)
	}
	c.clients[gv] = rc
	return rc, nil
}

// target is where a request for obj goes: the REST client of its group version and its resource.
type target struct {
	rc       *rest.RESTClient
	resource string
	gvk      schema.GroupVersionKind
}

func (c *REST) target(obj runtime.Object, list bool) (target, error) {
	gvks, _, err := c.scheme.ObjectKinds(obj)
	if err != nil {
		return target{}, fmt.Errorf("no kind of the client's scheme: %w", err)
	}
	gvk := gvks[0]
	if list {
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	}
	resource, ok := resources[gvk.GroupKind()]
	if !ok {
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		resource = plural.Resource
	}
	rc, err := c.clientFor(gvk.GroupVersion())
	if err != nil {
		return target{}, err
	}
	return target{rc: rc, resource: resource, gvk: gvk}, nil
}

// into decodes a response into obj: an unstructured object from its JSON (the serializer knows
// only the scheme's kinds), anything else by the negotiated serializer.
func into(res rest.Result, obj runtime.Object) error {
	u, ok := obj.(unstructuredJSON)
	if !ok {
		return res.Into(obj)
	}
	raw, err := res.Raw()
	if err != nil {
		return err
	}
	return u.UnmarshalJSON(raw)
}

// unstructuredJSON is an unstructured object or list, which reads its own JSON.
type unstructuredJSON interface {
	runtime.Unstructured
	json.Unmarshaler
}

// Get reads the object key names into obj.
func (c *REST) Get(ctx context.Context, key ObjectKey, obj Object) error {
	t, err := c.target(obj, false)
	if err != nil {
		return err
	}
	return c.notServed(ctx, t, into(t.rc.Get().NamespaceIfScoped(key.Namespace, key.Namespace != "").Resource(t.resource).Name(key.Name).Do(ctx), obj))
}

// List reads the objects opts select into list.
func (c *REST) List(ctx context.Context, list ObjectList, opts ...ListOption) error {
	t, err := c.target(list, true)
	if err != nil {
		return err
	}
	o := NewListOptions(opts)
	return c.notServed(ctx, t, into(t.rc.Get().NamespaceIfScoped(o.Namespace, o.Namespace != "").Resource(t.resource).
		SpecificallyVersionedParams(o.AsListOptions(), metav1.ParameterCodec, metav1.SchemeGroupVersion).Do(ctx), list))
}

// Watch watches the objects opts select, of list's kind. The request has no timeout of the
// client's (a watch is one long request); the API server ends it, or ctx does.
func (c *REST) Watch(ctx context.Context, list ObjectList, opts ...ListOption) (watch.Interface, error) {
	t, err := c.target(list, true)
	if err != nil {
		return nil, err
	}
	if _, ok := list.(runtime.Unstructured); ok {
		return nil, fmt.Errorf("the client watches only the kinds of its scheme, not unstructured %s", t.gvk)
	}
	o := NewListOptions(opts)
	lo := o.AsListOptions()
	lo.Watch = true
	w, err := t.rc.Get().NamespaceIfScoped(o.Namespace, o.Namespace != "").Resource(t.resource).
		SpecificallyVersionedParams(lo, metav1.ParameterCodec, metav1.SchemeGroupVersion).Watch(ctx)
	return w, c.notServed(ctx, t, err)
}

// Create creates obj and reads back what the API server made.
func (c *REST) Create(ctx context.Context, obj Object, opts ...CreateOption) error {
	t, err := c.target(obj, false)
	if err != nil {
		return err
	}
	co := &metav1.CreateOptions{}
	for _, o := range opts {
		o.ApplyToCreate(co)
	}
	ns := obj.GetNamespace()
	return c.notServed(ctx, t, into(t.rc.Post().NamespaceIfScoped(ns, ns != "").Resource(t.resource).
		SpecificallyVersionedParams(co, metav1.ParameterCodec, metav1.SchemeGroupVersion).Body(obj).Do(ctx), obj))
}

// Update replaces obj (conditional on its resourceVersion, when it has one).
func (c *REST) Update(ctx context.Context, obj Object) error {
	t, err := c.target(obj, false)
	if err != nil {
		return err
	}
	ns := obj.GetNamespace()
	return c.notServed(ctx, t, into(t.rc.Put().NamespaceIfScoped(ns, ns != "").Resource(t.resource).Name(obj.GetName()).Body(obj).Do(ctx), obj))
}

// Patch patches obj and reads back the result.
func (c *REST) Patch(ctx context.Context, obj Object, patch Patch) error {
	t, err := c.target(obj, false)
	if err != nil {
		return err
	}
	ns := obj.GetNamespace()
	return c.notServed(ctx, t, into(t.rc.Patch(patch.Type).NamespaceIfScoped(ns, ns != "").Resource(t.resource).Name(obj.GetName()).
		Body(patch.Data).Do(ctx), obj))
}

// Delete deletes obj.
func (c *REST) Delete(ctx context.Context, obj Object, opts ...DeleteOption) error {
	t, err := c.target(obj, false)
	if err != nil {
		return err
	}
	do := &metav1.DeleteOptions{}
	for _, o := range opts {
		o.ApplyToDelete(do)
	}
	ns := obj.GetNamespace()
	return c.notServed(ctx, t, t.rc.Delete().NamespaceIfScoped(ns, ns != "").Resource(t.resource).Name(obj.GetName()).Body(do).Do(ctx).Error())
}
