package migrate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netpool/netpool/internal/kubeclient"
)

// The lock that stops whereabouts from allocating from a pool, which whereabouts honours by its
// own code (v0.9.2, pkg/storage/kubernetes/ipam.go):
//
//   - every whereabouts allocation is committed by one JSON patch of its IPPool that starts with
//     a test of the resourceVersion it read, so the API server applies it only to that exact
//     version of the object;
//   - before it picks an address, whereabouts parses the pool's spec.range (net.ParseCIDR), and
//     fails the ADD when that fails; its DEL ignores every error, so DELs still succeed.
//
// Locking writes spec.range as lockedRangePrefix + the range, which no CIDR parser accepts. etcd
// orders that write against every whereabouts patch: a patch ordered after it read the pool
// either before the lock (its resourceVersion test fails; whereabouts reads the pool again, finds
// it locked, and fails) or after it (it fails before writing). So no allocation of the pool is
// committed after the lock, and every one committed before it is in the pool that the import
// reads after the lock: no window, whatever the nodes' clocks, caches or delays. A Multus that
// read a NAD before it was switched and calls whereabouts late gets an error, and the kubelet's
// retry reads the switched NAD. (The whereabouts OverlappingRangeIPReservation is written after
// the pool's patch, so it adds no address the pool does not hold.)
//
// A pool that does not exist yet is created locked, in the namespace whereabouts would use:
// whereabouts would create it empty on its next ADD and hand out .1 again.
const (
	// lockedRangePrefix starts the spec.range of a locked whereabouts IPPool.
	lockedRangePrefix = "netpool-migrated:"
	// lockAnnotation says, on a locked pool, who locked it and what undoes it.
	lockAnnotation = "netpool.io/whereabouts-lock"
	lockNote       = "locked by netpoolctl migrate whereabouts --switch-nads: whereabouts can no longer allocate from this pool, " +
		"whose addresses netpool holds; delete the pool once whereabouts is uninstalled"
	// lockRetries bounds the attempts against concurrent whereabouts writes of one pool.
	lockRetries = 20
)

// wbPoolKind is whereabouts' IPPool, read and written as unstructured.
var wbPoolKind = wbPoolList.GroupVersion().WithKind("IPPool")

// lockPool locks the whereabouts IPPool namespace/name of subnet, creating it locked when it does
// not exist. It reports whether this call locked it (false: it was locked already).
func lockPool(ctx context.Context, c kubeclient.Client, namespace, name string, subnet netip.Prefix) (bool, error) {
	locked := lockedRangePrefix + subnet.String()
	for range lockRetries {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(wbPoolKind)
		err := c.Get(ctx, kubeclient.ObjectKey{Namespace: namespace, Name: name}, u)
		if apierrors.IsNotFound(err) {
			u = &unstructured.Unstructured{Object: map[string]any{
				"spec": map[string]any{"range": locked, "allocations": map[string]any{}},
			}}
			u.SetGroupVersionKind(wbPoolKind)
			u.SetNamespace(namespace)
			u.SetName(name)
			u.SetAnnotations(map[string]string{lockAnnotation: lockNote})
			err = c.Create(ctx, u)
			if apierrors.IsAlreadyExists(err) {
				continue // whereabouts created it meanwhile: lock that one
			}
			if err != nil {
				return false, fmt.Errorf("failed to create the locked whereabouts IPPool %s/%s: %w", namespace, name, err)
			}
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("failed to read whereabouts IPPool %s/%s: %w", namespace, name, err)
		}
		have, _, _ := unstructured.NestedString(u.Object, "spec", "range")
		if have == locked {
			return false, nil
		}
		if want := subnet.String(); have != want {
			// Only a pool whose range is the NAD's is locked (resolvePool checked it; the test below
			// makes sure it did not change since).
			if p, err := netip.ParsePrefix(have); err != nil || p.Masked() != subnet {
				return false, fmt.Errorf("whereabouts IPPool %s/%s has range %q, not %s: not locked", namespace, name, have, want)
			}
		}
		err = patchRange(ctx, c, u, have, locked, true)
		if isTestFailed(err) {
			continue // whereabouts allocated meanwhile: read it again
		}
		if err != nil {
			return false, fmt.Errorf("failed to lock whereabouts IPPool %s/%s: %w", namespace, name, err)
		}
		return true, nil
	}
	return false, fmt.Errorf("failed to lock whereabouts IPPool %s/%s: it changed on each of %d attempts", namespace, name, lockRetries)
}

// unlockPool gives a pool lockPool locked its range back, so whereabouts allocates from it again:
// only for a switch that stops before any NAD is switched.
func unlockPool(ctx context.Context, c kubeclient.Client, namespace, name string, subnet netip.Prefix) error {
	for range lockRetries {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(wbPoolKind)
		if err := c.Get(ctx, kubeclient.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
			return fmt.Errorf("failed to read whereabouts IPPool %s/%s: %w", namespace, name, err)
		}
		have, _, _ := unstructured.NestedString(u.Object, "spec", "range")
		if have != lockedRangePrefix+subnet.String() {
			return nil
		}
		err := patchRange(ctx, c, u, have, subnet.String(), false)
		if isTestFailed(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("failed to unlock whereabouts IPPool %s/%s: %w", namespace, name, err)
		}
		return nil
	}
	return fmt.Errorf("failed to unlock whereabouts IPPool %s/%s: it changed on each of %d attempts", namespace, name, lockRetries)
}

// patchRange replaces spec.range of u, from have to want, by a JSON patch that tests u's
// resourceVersion and range first (the same guard whereabouts' own writes use), and sets or
// removes the lock annotation.
func patchRange(ctx context.Context, c kubeclient.Client, u *unstructured.Unstructured, have, want string, lock bool) error {
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": u.GetResourceVersion()},
		{"op": "test", "path": "/spec/range", "value": have},
		{"op": "replace", "path": "/spec/range", "value": want},
	}
	annotation := "/metadata/annotations/" + jsonPointerEscape(lockAnnotation)
	switch _, has := u.GetAnnotations()[lockAnnotation]; {
	case lock && u.GetAnnotations() == nil:
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{lockAnnotation: lockNote}})
	case lock:
		ops = append(ops, map[string]any{"op": "add", "path": annotation, "value": lockNote})
	case has:
		ops = append(ops, map[string]any{"op": "remove", "path": annotation})
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	return c.Patch(ctx, u, kubeclient.RawPatch(types.JSONPatchType, data))
}

// isTestFailed reports whether a JSON patch failed on one of its tests: the API server answers
// 422 (Invalid) when the object changed since it was read.
func isTestFailed(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsConflict(err)
}

// jsonPointerEscape escapes a key for a JSON pointer (RFC 6901).
func jsonPointerEscape(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '~':
			out = append(out, '~', '0')
		case '/':
			out = append(out, '~', '1')
		default:
			out = append(out, s[i])
		}
	}
	return string(out)
}
