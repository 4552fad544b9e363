package cluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"bytes"
	"io"
)

// FieldManager is the server-side apply field manager of what the harness applies.
const FieldManager = "netpool-test-cluster"

// Apply server-side applies objs in order, as kubectl apply --server-side would: CRDs first, each
// waited for until established, so that objects of their kinds that follow find them.
func (c *Cluster) Apply(ctx context.Context, objs []*unstructured.Unstructured) error {
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	var crds, rest []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		} else {
			rest = append(rest, o)
		}
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, o := range crds {
		if err := applyOne(ctx, dyn.Resource(crdGVR), o); err != nil {
			return err
		}
	}
	for _, o := range crds {
		err := c.wait(ctx, time.Minute, "CRD "+o.GetName()+" established", func(ctx context.Context) error {
			got, err := dyn.Resource(crdGVR).Get(ctx, o.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, cd := range conds {
				m, _ := cd.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
			return fmt.Errorf("not established: %v", conds)
		})
		if err != nil {
			return err
		}
	}
	resource := c.resources(dyn)
	for _, o := range rest {
		ri, err := resource(o)
		if err != nil {
			return err
		}
		if err := applyOne(ctx, ri, o); err != nil {
			return err
		}
	}
	return nil
}

// Delete deletes objs, in order, in the foreground (an object's dependents, such as a DaemonSet's
// pods, go first); one already gone is not an error.
func (c *Cluster) Delete(ctx context.Context, objs []*unstructured.Unstructured) error {
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	resource := c.resources(dyn)
	foreground := metav1.DeletePropagationForeground
	for _, o := range objs {
		ri, err := resource(o)
		if err != nil {
			return err
		}
		err = ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{PropagationPolicy: &foreground})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// resources returns the dynamic client of an object's kind and namespace ("default" when it names
// none), found through discovery.
func (c *Cluster) resources(dyn dynamic.Interface) func(*unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	return func(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("kind %s of %s: %w", gvk, o.GetName(), err)
		}
		if m.Scope.Name() != meta.RESTScopeNameNamespace {
			return dyn.Resource(m.Resource), nil
		}
		ns := o.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		return dyn.Resource(m.Resource).Namespace(ns), nil
	}
}

func applyOne(ctx context.Context, ri dynamic.ResourceInterface, o *unstructured.Unstructured) error {
	data, err := o.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("applying %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

// DecodeYAML splits a multi-document YAML file into objects.
func DecodeYAML(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return DecodeYAMLBytes(data)
}

// DecodeYAMLBytes splits multi-document YAML (or JSON) into objects.
func DecodeYAMLBytes(data []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); err != nil {
			if err == io.EOF {
				return out, nil
			}
			return nil, err
		}
		if len(o.Object) > 0 {
			out = append(out, o)
		}
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
