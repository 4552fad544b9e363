package kubeclient

import (
	"context"
	"encoding/json"
	"fmt"
	"path"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// notServed turns a NotFound that means "the API server does not serve this kind" (a CRD not
// installed: the request's path does not exist) into meta's NoKindMatchError, as a client that
// maps kinds by discovery would answer, so that a caller never takes a missing kind for a missing
// object (the GC policy would call an IPAMClaim whose CRD is gone a deleted claim). It asks the
// API server's discovery of the group version only after a NotFound, and remembers a kind it
// serves; any other error passes unchanged.
func (c *REST) notServed(ctx context.Context, t target, err error) error {
	if !apierrors.IsNotFound(err) {
		return err
	}
	c.mu.Lock()
	known := c.served[t.gvk]
	c.mu.Unlock()
	if known {
		return err
	}
	served, derr := c.serves(ctx, t)
	switch {
	case derr != nil:
		return fmt.Errorf("%w (and discovery of %s failed: %v)", err, t.gvk.GroupVersion(), derr)
	case !served:
		return &meta.NoKindMatchError{GroupKind: t.gvk.GroupKind(), SearchedVersions: []string{t.gvk.Version}}
	}
	c.mu.Lock()
	c.served[t.gvk] = true
	c.mu.Unlock()
	return err
}

// serves reports whether the API server's discovery of t's group version lists t's resource.
func (c *REST) serves(ctx context.Context, t target) (bool, error) {
	p := path.Join("/apis", t.gvk.Group, t.gvk.Version)
	if t.gvk.Group == "" {
		p = path.Join("/api", t.gvk.Version)
	}
	raw, err := t.rc.Get().AbsPath(p).Do(ctx).Raw()
	if apierrors.IsNotFound(err) {
		return false, nil // the group version is not served at all
	}
	if err != nil {
		return false, err
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(raw, &list); err != nil {
		return false, fmt.Errorf("failed to decode the discovery of %s: %w", t.gvk.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Name == t.resource {
			return true, nil
		}
	}
	return false, nil
}
