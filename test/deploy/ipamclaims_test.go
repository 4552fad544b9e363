package deploy

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	ipamclaimsv1 "github.com/k8snetworkplumbingwg/ipamclaims/pkg/crd/ipamclaims/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/netpool/netpool/test/envtest"
)

// TestIPAMClaimsComponent: deploy/components/ipamclaims is the IPAMClaim CRD of the ipamclaims
// module netpool is built with, object for object; the base builds with it; and on a real API
// server it serves the claims KubeVirt's ipam-extensions creates.
func TestIPAMClaimsComponent(t *testing.T) {
	component := filepath.Join("..", "..", "deploy", "components", "ipamclaims")
	shipped := decodeCRD(t, filepath.Join(component, "ipamclaims-crd.yaml"))
	if pinned := decodeCRD(t, envtest.IPAMClaimCRDFile(t)); !reflect.DeepEqual(shipped, pinned) {
		t.Fatal("deploy/components/ipamclaims/ipamclaims-crd.yaml is not the pinned ipamclaims module's CRD: copy it again from its artifacts/")
	}

	// The base with the component, as an operator's kustomization would combine them.
	dir := t.TempDir()
	abs, err := filepath.Abs(filepath.Join("..", "..", "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(abs, p))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := "resources:\n- " + rel("base") + "\ncomponents:\n- " + rel("components/ipamclaims") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build of the base with the component: %v", err)
	}
	found := false
	for _, r := range res.Resources() {
		found = found || r.GetKind() == "CustomResourceDefinition" && r.GetName() == shipped.Name
	}
	if !found {
		t.Fatalf("the base with the component renders no CRD %s", shipped.Name)
	}

	env := envtest.Start(t)
	ctx := context.Background()
	crd := shipped.DeepCopy()
	if err := env.Client.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return false, err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the IPAMClaim CRD is not established: %v", err)
	}
	// A claim as ipam-extensions creates it: spec.network alone.
	claim := &ipamclaimsv1.IPAMClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm-a.anet"},
		Spec: ipamclaimsv1.IPAMClaimSpec{Network: "vm-net"}}
	if err := env.Client.Create(ctx, claim, client.DryRunAll); err != nil {
		t.Fatalf("creating a claim as ipam-extensions does: %v", err)
	}
}

func decodeCRD(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return crd
}
