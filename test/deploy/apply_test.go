package deploy

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/harness/kustomize"
)

// minimumMinor is the oldest Kubernetes the README and docs/kubernetes-api.md state, and the
// version of hack/envtest-minimum's kube-apiserver.
const minimumMinor = "33"

// TestEveryOverlayAppliesOnTheMinimumKubernetes applies each kustomization an operator applies,
// as `kubectl apply -k` does (every object mapped to a served kind first, then a server-side apply
// with strict field validation, for real), to a kube-apiserver of the minimum Kubernetes version
// with only that overlay's prerequisites: nothing for the base and the local overlay, the
// Prometheus Operator's kinds for the full one. Then deploy/examples applies on top, with Multus'
// NAD CRD. The full overlay applies the same way to the version the other tests run. On 1.32 the
// CRDs' validation rules would not compile (docs/kubernetes-api.md).
func TestEveryOverlayAppliesOnTheMinimumKubernetes(t *testing.T) {
	tree := kustomize.DeployWithLocal(t, kustomize.LocalOverlay(localTag))
	type overlay struct {
		dir           string
		prerequisites []string
	}
	overlays := []overlay{
		{"base", nil},
		{"overlays/local", nil},
		{"overlays/full", []string{"monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_podmonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"}},
	}
	// The minimum version for every overlay; the version the tests run for the fullest one.
	runs := []struct {
		module string
		overlay
	}{{envtest.MinimumModule, overlays[0]}, {envtest.MinimumModule, overlays[1]}, {envtest.MinimumModule, overlays[2]}, {envtest.DefaultModule, overlays[2]}}
	for _, k := range runs {
		t.Run(k.module+"/"+strings.ReplaceAll(k.dir, "/", "-"), func(t *testing.T) {
			env := envtest.StartBare(t, k.module)
			if k.module == envtest.MinimumModule {
				checkMinor(t, env)
			}
			for _, p := range k.prerequisites {
				env.InstallCRDFiles(t, filepath.Join("testdata", p))
			}
			applied := kubectlApply(t, env, build(t, tree, k.dir))
			if applied < 15 {
				t.Errorf("deploy/%s: %d objects applied", k.dir, applied)
			}
			env.WaitCRDsEstablished(t)
			if k.dir == "overlays/full" {
				env.InstallNADCRD(t) // Multus', which the example NADs need
				if n := kubectlApply(t, env, kustomize.Render(t, "examples")); n != 5 {
					t.Errorf("deploy/examples: %d objects applied, want 5", n)
				}
			}
		})
	}
}

// checkMinor fails the test unless the API server is of the minimum version.
func checkMinor(t *testing.T, env *envtest.Env) {
	t.Helper()
	d, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := d.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.Major != "1" || v.Minor != minimumMinor {
		t.Fatalf("the API server is %s, want 1.%s", v.GitVersion, minimumMinor)
	}
}

// kubectlApply does what kubectl apply does with objs: it maps every object to a kind the API
// server serves (kubectl reports what it cannot map and applies the rest; here nothing may be
// unmapped), then applies each, server-side, with strict field validation. It returns how many
// objects it applied.
func kubectlApply(t *testing.T, env *envtest.Env, objs []*unstructured.Unstructured) int {
	t.Helper()
	d, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(d))
	var unmapped []string
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			unmapped = append(unmapped, fmt.Sprintf("%s %s: %v", gvk.Kind, o.GetName(), err))
		}
	}
	if len(unmapped) > 0 {
		sort.Strings(unmapped)
		t.Fatalf("kubectl would apply the rest and fail on these: %s", strings.Join(unmapped, "; "))
	}
	ctx := context.Background()
	n := 0
	for _, o := range objs {
		data, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		err = env.Client.Patch(ctx, o.DeepCopy(), client.RawPatch(types.ApplyPatchType, data),
			client.FieldOwner("kubectl"), client.ForceOwnership, client.FieldValidation("Strict"))
		if err != nil {
			t.Errorf("%s %s does not apply: %v", o.GetKind(), o.GetName(), err)
			continue
		}
		n++
	}
	return n
}
