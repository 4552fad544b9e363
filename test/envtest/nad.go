package envtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// nadCRDFile is the NetworkAttachmentDefinition CRD as Multus installs it, kept with the
// harness's test data.
const nadCRDFile = "test/envtest/testdata/nad-crd.yaml"

// InstallNADCRD installs the NetworkAttachmentDefinition CRD and waits until it is established,
// for tests that create NADs (Multus reads them). A CRD already installed (by another test of a
// shared Env) is waited for, not an error.
func (e *Env) InstallNADCRD(tb testing.TB) {
	tb.Helper()
	root, err := moduleRoot()
	if err != nil {
		tb.Fatalf("finding the checkout: %v", err)
	}
	e.InstallCRDFiles(tb, filepath.Join(root, nadCRDFile))
}

// InstallCRDFiles installs the CRDs of the given YAML files (one CRD each) and waits until each is
// established. A CRD already installed is waited for, not an error, so tests that share an Env
// may each install what they need.
func (e *Env) InstallCRDFiles(tb testing.TB, paths ...string) {
	tb.Helper()
	for _, p := range paths {
		if err := installCRDFile(e.Client, p); err != nil {
			tb.Fatalf("installing the CRD of %s: %v", p, err)
		}
	}
}

func installCRDFile(c client.Client, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return false, err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}
