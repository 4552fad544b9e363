package envtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/netpool/netpool/test/poll"
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
	return poll.Until(ctx, 100*time.Millisecond, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return err
		}
		if !established(crd) {
			return fmt.Errorf("CRD %s is not established", crd.Name)
		}
		return nil
	})
}

// WaitCRDsEstablished waits until every CRD the cluster holds is established, its kinds served:
// for tests that install CRDs by applying manifests.
func (e *Env) WaitCRDsEstablished(tb testing.TB) {
	tb.Helper()
	poll.Eventually(tb, 30*time.Second, "every CRD is established", func() error {
		var crds apiextensionsv1.CustomResourceDefinitionList
		if err := e.Client.List(context.Background(), &crds); err != nil {
			return err
		}
		if len(crds.Items) == 0 {
			return errors.New("no CRD")
		}
		for i := range crds.Items {
			if !established(&crds.Items[i]) {
				return fmt.Errorf("CRD %s is not established", crds.Items[i].Name)
			}
		}
		return nil
	})
}

// established reports whether the API server serves crd's kind.
func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
