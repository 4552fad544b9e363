package deploy

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/netpool/netpool/test/envtest"
	"github.com/netpool/netpool/test/harness"
)

// image is what every container runs: the one image make image builds, tagged in one place (the
// base's images: entry).
const image = "ghcr.io/netpool/netpool:latest"

// kustomizations are every kustomization an operator applies; components are covered through the
// overlay that combines them.
var kustomizations = []string{"base", "overlays/full"}

func kindsOf(objs []*unstructured.Unstructured) map[string]int {
	k := map[string]int{}
	for _, o := range objs {
		k[o.GetKind()]++
	}
	return k
}

// TestKustomizationsRender: each kustomization builds, holds what it promises, and names only the
// one image, with the tag set in one place.
func TestKustomizationsRender(t *testing.T) {
	base := harness.RenderDeploy(t, "base")
	kinds := kindsOf(base)
	for _, k := range []string{"CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "DaemonSet", "Deployment", "Service"} {
		if kinds[k] == 0 {
			t.Errorf("deploy/base renders no %s (kinds: %v)", k, kinds)
		}
	}
	// Every CRD generated into deploy/base/crds is in the base: a new kind cannot be forgotten.
	files, err := filepath.Glob(filepath.Join("..", "..", "deploy", "base", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("deploy/base/crds: %v", err)
	}
	var want, got []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		want = append(want, crd.Metadata.Name)
	}
	for _, o := range base {
		if o.GetKind() == "CustomResourceDefinition" {
			got = append(got, o.GetName())
		}
	}
	sort.Strings(want)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("the base holds CRDs %v, deploy/base/crds holds %v", got, want)
	}
	if !hasObject(base, "ClusterRole", "netpool-viewer") {
		t.Error("the base has no read-only netpool-viewer ClusterRole for netpoolctl users")
	}

	for _, dir := range kustomizations {
		objs := harness.RenderDeploy(t, dir)
		var images []string
		for _, o := range objs {
			images = append(images, containerImages(t, o)...)
		}
		if len(images) == 0 {
			t.Errorf("deploy/%s runs no container", dir)
		}
		for _, img := range images {
			if img != image {
				t.Errorf("deploy/%s runs image %s, want %s", dir, img, image)
			}
		}
	}

	full := harness.RenderDeploy(t, "overlays/full")
	fk := kindsOf(full)
	if fk["NetworkAttachmentDefinition"] != 3 || fk["ServiceMonitor"] != 1 || !hasObject(full, "ConfigMap", "netpool-grafana-dashboard") || fk["IPPool"] != 1 {
		t.Errorf("deploy/overlays/full kinds %v: want 3 example NADs, the pool one references, a ServiceMonitor and the dashboard ConfigMap", fk)
	}
	checkServiceMonitor(t, full)
}

func hasObject(objs []*unstructured.Unstructured, kind, name string) bool {
	return slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == kind && o.GetName() == name })
}

// containerImages lists the images of a workload's containers and init containers.
func containerImages(t *testing.T, o *unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, field := range []string{"containers", "initContainers"} {
		cs, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
		if err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
		for _, c := range cs {
			img, _ := c.(map[string]any)["image"].(string)
			out = append(out, img)
		}
	}
	return out
}

// checkServiceMonitor: the Prometheus Operator's CRDs are not served from the module proxy, so
// the ServiceMonitor cannot be dry-run here; instead it must select the controller's metrics
// Service and name a port that Service has.
func checkServiceMonitor(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var sm, svc *unstructured.Unstructured
	for _, o := range objs {
		switch {
		case o.GetKind() == "ServiceMonitor":
			sm = o
		case o.GetKind() == "Service" && o.GetName() == "netpool-controller-metrics":
			svc = o
		}
	}
	if sm == nil || svc == nil {
		t.Fatal("the full overlay lacks the ServiceMonitor or the controller's metrics Service")
	}
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range sel {
		if svc.GetLabels()[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s, the metrics Service is labelled %v", k, v, svc.GetLabels())
		}
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	for _, e := range eps {
		port := e.(map[string]any)["port"]
		if !slices.ContainsFunc(ports, func(p any) bool { return p.(map[string]any)["name"] == port }) {
			t.Errorf("ServiceMonitor scrapes port %v, the Service has %v", port, ports)
		}
	}
	if len(sel) == 0 || len(eps) == 0 {
		t.Errorf("ServiceMonitor selects %v with endpoints %v", sel, eps)
	}
}

// TestKustomizationsApplyWithAServerSideDryRun: every object the kustomizations render is valid
// against a real API server. The CRDs are created for real first (a dry run of a CRD serves no
// kind), then everything else is applied with a server-side dry run; the namespaces too are
// created for real, since a dry run of an object needs its namespace to exist.
func TestKustomizationsApplyWithAServerSideDryRun(t *testing.T) {
	env := envtest.Start(t) // netpool's CRDs are installed from crds/bases
	env.InstallNADCRD(t)    // Multus' NAD CRD, which the example NADs need
	ctx := context.Background()
	for _, dir := range kustomizations {
		objs := harness.RenderDeploy(t, dir)
		for _, o := range objs {
			if o.GetKind() != "Namespace" {
				continue
			}
			if err := env.Client.Create(ctx, o.DeepCopy()); client.IgnoreAlreadyExists(err) != nil {
				t.Fatalf("namespace %s: %v", o.GetName(), err)
			}
		}
		applied := 0
		for _, o := range objs {
			if o.GetKind() == "Namespace" || strings.HasSuffix(o.GetAPIVersion(), "monitoring.coreos.com/v1") && o.GetKind() == "ServiceMonitor" {
				continue
			}
			err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o),
				client.FieldOwner("netpool-kustomize-test"), client.ForceOwnership, client.DryRunAll)
			if err != nil {
				t.Errorf("deploy/%s: %s %s does not apply: %v", dir, o.GetKind(), o.GetName(), err)
			}
			applied++
		}
		if applied < 10 {
			t.Errorf("deploy/%s: only %d objects applied", dir, applied)
		}
	}
}
