package deploy

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/netpool/netpool/test/harness"
	"github.com/netpool/netpool/test/harness/kustomize"
)

// image is what every container of the base runs: the one image make image builds, tagged in one
// place (the base's images: entry).
const image = "ghcr.io/netpool/netpool:latest"

// localTag is the tag the quick start's local overlay names (make -s version), here a stand-in.
const localTag = "v0.1.0-7-gabc1234"

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
	base := kustomize.Render(t, "base")
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

	tree := kustomize.DeployWithLocal(t, kustomize.LocalOverlay(localTag))
	for _, k := range []struct{ dir, image string }{
		{"base", image},
		{"overlays/local", "ghcr.io/netpool/netpool:" + localTag},
		// The full overlay is the local one with components: it keeps the local tag.
		{"overlays/full", "ghcr.io/netpool/netpool:" + localTag},
	} {
		objs := build(t, tree, k.dir)
		var images []string
		for _, o := range objs {
			images = append(images, containerImages(t, o)...)
		}
		if len(images) == 0 {
			t.Errorf("deploy/%s runs no container", k.dir)
		}
		for _, img := range images {
			if img != k.image {
				t.Errorf("deploy/%s runs image %s, want %s", k.dir, img, k.image)
			}
		}
	}

	full := build(t, tree, "overlays/full")
	fk := kindsOf(full)
	if fk["ServiceMonitor"] != 1 || fk["PodMonitor"] != 1 || fk["PrometheusRule"] != 1 || !hasObject(full, "ConfigMap", "netpool-grafana-dashboard") ||
		fk["NetworkAttachmentDefinition"] != 0 || fk["IPPool"] != 0 {
		t.Errorf("deploy/overlays/full kinds %v: want the local overlay with a ServiceMonitor, a PodMonitor, a PrometheusRule and the dashboard, and no object of a CRD it installs", fk)
	}
	checkServiceMonitor(t, full)
	checkPodMonitor(t, full)

	// Without the local overlay, the full one stops before anything is applied, naming it.
	if _, err := kustomize.Build(filepath.Join("..", "..", "deploy", "overlays", "full")); err == nil && !localExists() {
		t.Error("deploy/overlays/full builds without deploy/overlays/local")
	} else if err != nil && !strings.Contains(err.Error(), filepath.Join("overlays", "local")) {
		t.Errorf("deploy/overlays/full without the local overlay: %v, want an error naming overlays/local", err)
	}

	examples := kustomize.Render(t, "examples")
	if ek := kindsOf(examples); ek["NetworkAttachmentDefinition"] != 3 || ek["IPPool"] != 1 || ek["Namespace"] != 1 {
		t.Errorf("deploy/examples kinds %v: want 3 NADs, the pool one references and their namespace", ek)
	}
	checkExamplesApart(t, examples)
}

// localExists reports whether the checkout has an overlays/local of its own (a developer's).
func localExists() bool {
	_, err := os.Stat(filepath.Join("..", "..", "deploy", "overlays", "local", "kustomization.yaml"))
	return err == nil
}

// build renders dir of the deploy tree at tree.
func build(t *testing.T, tree, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := kustomize.Build(filepath.Join(tree, dir))
	if err != nil {
		t.Fatalf("kustomize build deploy/%s: %v", dir, err)
	}
	return objs
}

// checkExamplesApart: the example NADs share neither a network name nor an address with the
// README quick start's NAD (storage, 192.168.20.0/22), so both can live in one cluster.
func checkExamplesApart(t *testing.T, examples []*unstructured.Unstructured) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section, err := harness.MarkdownSection(string(readme), "Kubernetes quick start")
	if err != nil {
		t.Fatal(err)
	}
	var quick []string
	for _, b := range harness.FencedBlocks(section) {
		if b.Lang == "yaml" && strings.Contains(b.Body, "NetworkAttachmentDefinition") {
			quick = append(quick, b.Body)
		}
	}
	if len(quick) != 1 {
		t.Fatalf("the README's Kubernetes quick start has %d NADs, want 1", len(quick))
	}
	var nad struct {
		Spec struct{ Config string } `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(quick[0]), &nad); err != nil {
		t.Fatal(err)
	}
	qName, qRanges := ipamOf(t, nad.Spec.Config)
	for _, o := range examples {
		if o.GetKind() != "NetworkAttachmentDefinition" {
			continue
		}
		config, _, _ := unstructured.NestedString(o.Object, "spec", "config")
		name, ranges := ipamOf(t, config)
		if name != "" && name == qName {
			t.Errorf("example NAD %s has the quick start's network_name %s", o.GetName(), name)
		}
		for _, r := range ranges {
			for _, q := range qRanges {
				if r.Overlaps(q) {
					t.Errorf("example NAD %s's range %s overlaps the quick start's %s", o.GetName(), r, q)
				}
			}
		}
	}
}

func ipamOf(t *testing.T, config string) (string, []netip.Prefix) {
	t.Helper()
	var c struct {
		IPAM struct {
			Range       string `json:"range"`
			NetworkName string `json:"network_name"`
			IPRanges    []struct {
				Range string `json:"range"`
			} `json:"ipRanges"`
		} `json:"ipam"`
	}
	if err := json.Unmarshal([]byte(config), &c); err != nil {
		t.Fatalf("config %s: %v", config, err)
	}
	var out []netip.Prefix
	for _, r := range append([]string{c.IPAM.Range}, func() []string {
		var rs []string
		for _, x := range c.IPAM.IPRanges {
			rs = append(rs, x.Range)
		}
		return rs
	}()...) {
		if p, err := netip.ParsePrefix(r); err == nil {
			out = append(out, p)
		}
	}
	return c.IPAM.NetworkName, out
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

// checkPodMonitor: the PodMonitor selects the agent DaemonSet's pods and scrapes a port their
// container names (9402, metrics).
func checkPodMonitor(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var pm, ds *unstructured.Unstructured
	for _, o := range objs {
		switch {
		case o.GetKind() == "PodMonitor":
			pm = o
		case o.GetKind() == "DaemonSet" && o.GetName() == "netpool-agent":
			ds = o
		}
	}
	if pm == nil || ds == nil {
		t.Fatal("the full overlay lacks the PodMonitor or the agent DaemonSet")
	}
	sel, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
	labels, _, _ := unstructured.NestedStringMap(ds.Object, "spec", "template", "metadata", "labels")
	for k, v := range sel {
		if labels[k] != v {
			t.Errorf("PodMonitor selects %s=%s, the agent pods are labelled %v", k, v, labels)
		}
	}
	containers, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
	eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	for _, e := range eps {
		port := e.(map[string]any)["port"]
		found := false
		for _, c := range containers {
			ports, _, _ := unstructured.NestedSlice(c.(map[string]any), "ports")
			for _, p := range ports {
				if p.(map[string]any)["name"] == port && p.(map[string]any)["containerPort"] == int64(9402) {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("PodMonitor scrapes port %v, which no agent container names as 9402", port)
		}
	}
	if len(sel) == 0 || len(eps) == 0 {
		t.Errorf("PodMonitor selects %v with endpoints %v", sel, eps)
	}
}
