package crds_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/netpool/netpool/test/envtest"
)

// whereabouts is the module whose CRDs share netpool's plural names (ippools,
// overlappingrangeipreservations): a cluster migrating from whereabouts has both.
const whereabouts = "github.com/k8snetworkplumbingwg/whereabouts@v0.9.2"

// TestKubectlNamesAreUnambiguousNextToWhereabouts installs whereabouts' IPPool and
// OverlappingRangeIPReservation CRDs next to netpool's and resolves names as kubectl does (the
// discovery REST mapper with its short-name and category expanders): the plural `ippools` matches
// both groups, so kubectl picks one by group priority, while the `netpool` category and netpool's
// short names resolve to netpool's kinds alone.
func TestKubectlNamesAreUnambiguousNextToWhereabouts(t *testing.T) {
	env := envtest.Start(t)
	for _, file := range []string{"whereabouts.cni.cncf.io_ippools.yaml", "whereabouts.cni.cncf.io_overlappingrangeipreservations.yaml"} {
		env.InstallCRDFiles(t, filepath.Join(moduleDir(t, whereabouts), "doc", "crds", file))
	}
	disc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	cached := memory.NewMemCacheClient(disc)
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, func(w string) { t.Log(w) })

	// The ambiguity is real: the plural alone names two kinds.
	matches, err := mapper.ResourcesFor(schema.GroupVersionResource{Resource: "ippools"})
	if err != nil {
		t.Fatal(err)
	}
	if groups := groupsOf(matches); !slices.Equal(groups, []string{"ipam.netpool.io", "whereabouts.cni.cncf.io"}) {
		t.Fatalf("`ippools` matches groups %q, want netpool's and whereabouts'", groups)
	}

	for name, want := range map[string]string{
		"nppool":                  "IPPool",
		"ipp":                     "IPPool",
		"npres":                   "OverlappingRangeIPReservation",
		"orir":                    "OverlappingRangeIPReservation",
		"npslice":                 "IPPoolSlice",
		"ippools.ipam.netpool.io": "IPPool",
	} {
		gr := schema.ParseGroupResource(name)
		kinds, err := mapper.KindsFor(schema.GroupVersionResource{Group: gr.Group, Resource: gr.Resource})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(kinds) != 1 || kinds[0].Group != "ipam.netpool.io" || kinds[0].Kind != want {
			t.Errorf("`kubectl get %s` resolves to %v, want only ipam.netpool.io %s", name, kinds, want)
		}
	}

	categories := restmapper.NewDiscoveryCategoryExpander(cached)
	got, ok := categories.Expand("netpool")
	if !ok {
		t.Fatal("no netpool category")
	}
	var names []string
	for _, gr := range got {
		names = append(names, gr.String())
	}
	slices.Sort(names)
	want := []string{"egressrouters.network.netpool.io", "ippools.ipam.netpool.io", "ippoolslices.ipam.netpool.io", "overlappingrangeipreservations.ipam.netpool.io"}
	if !slices.Equal(names, want) {
		t.Fatalf("`kubectl get netpool` lists %q, want %q", names, want)
	}
}

func groupsOf(gvrs []schema.GroupVersionResource) []string {
	var groups []string
	for _, g := range gvrs {
		groups = append(groups, g.Group)
	}
	slices.Sort(groups)
	return slices.Compact(groups)
}

// moduleDir downloads module (path@version) into the module cache through the Go module proxy and
// returns its directory. Nothing of it is committed: the test reads the files where the cache keeps
// them.
func moduleDir(t *testing.T, module string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to download %s: %v", module, err)
	}
	cmd := exec.Command(gobin, "mod", "download", "-json", module)
	cmd.Dir = t.TempDir() // outside this module: its go.mod and vendoring play no part
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr != nil || err != nil || info.Dir == "" {
		t.Fatalf("go mod download %s: %v %v %s %s", module, err, jerr, info.Error, out)
	}
	return info.Dir
}
