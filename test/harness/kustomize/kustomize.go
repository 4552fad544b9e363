// Package kustomize renders the repository's deploy/ with the kustomize library, as `kubectl apply -k`
// does, for the tests of test/deploy and test/e2e. It is a package of its own so that what links the
// rest of test/harness (make demo among them) links no kustomize and no Kubernetes client.
package kustomize

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Render builds the kustomization deploy/<dir> of the repository with the kustomize library,
// as `kubectl apply -k` does, from a test package two levels below the root (test/<pkg>).
func Render(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Build(filepath.Join("..", "..", "deploy", dir))
	if err != nil {
		t.Fatalf("kustomize build deploy/%s: %v", dir, err)
	}
	return objs
}

// LocalOverlay is the overlay the README's Kubernetes quick start (step 2) has an operator write,
// for the image tag tag.
func LocalOverlay(tag string) string {
	return "resources: [../../base]\nimages: [{name: ghcr.io/netpool/netpool, newTag: \"" + tag + "\"}]\n"
}

// DeployWithLocal copies the repository's deploy/ into a temporary directory, writes
// overlays/local/kustomization.yaml there with content, and returns the copy's path: the tree an
// operator has after the quick start's step 2.
func DeployWithLocal(t testing.TB, content string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "deploy")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "deploy"))); err != nil {
		t.Fatalf("copying deploy/: %v", err)
	}
	local := filepath.Join(dir, "overlays", "local")
	_ = os.RemoveAll(local) // an overlay the developer wrote in the checkout is not the test's
	if err := os.MkdirAll(local, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(local, "kustomization.yaml"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Build builds the kustomization at path with the kustomize library.
func Build(path string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), path)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, r := range resMap.Resources() {
		// Through JSON: kustomize's maps hold Go ints, which unstructured's helpers refuse.
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(data); err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
	return objs, nil
}
